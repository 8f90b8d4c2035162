package deploy

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
)

// nodeNameExtra is the user extra a bound service account token carries with the name of the node its pod runs
// on (Kubernetes 1.32 and later; the real-node case refuses another node's change with it).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// checkOwnNodePolicy: the RBAC rules let the agent patch every Node; a ValidatingAdmissionPolicy, bound to
// deny, narrows its changes to the Node whose name its token carries, and to the startup taint in the spec.
func checkOwnNodePolicy(t *testing.T, objs objects, sa *corev1.ServiceAccount) {
	t.Helper()
	p := theOne(t, "ValidatingAdmissionPolicy", objs.policies)
	b := theOne(t, "ValidatingAdmissionPolicyBinding", objs.policyBindings)
	if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %s: policy %q, actions %v; want %s with Deny", b.Name, b.Spec.PolicyName, b.Spec.ValidationActions, p.Name)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail: a policy that cannot be evaluated must not let the change through", p.Spec.FailurePolicy)
	}
	mc := p.Spec.MatchConstraints
	if mc == nil || len(mc.ResourceRules) != 1 {
		t.Fatalf("matchConstraints %+v, want one rule for nodes and nodes/status", mc)
	}
	r := mc.ResourceRules[0]
	if !slices.Equal(r.Resources, []string{"nodes", "nodes/status"}) || !slices.Contains(r.Operations, admissionv1.Update) {
		t.Errorf("rule %+v, want UPDATE (a patch is one) of nodes and nodes/status", r.RuleWithOperations)
	}
	user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, "'"+user+"'") {
		t.Errorf("matchConditions %+v, want one naming %s", p.Spec.MatchConditions, user)
	}
	var all string
	for _, v := range p.Spec.Validations {
		all += v.Expression + "\n"
	}
	for _, want := range []string{nodeNameExtra, "object.metadata.name", "node.eniwire.io/agent-not-ready"} {
		if !strings.Contains(all, want) {
			t.Errorf("the validations do not mention %s:\n%s", want, all)
		}
	}
}
