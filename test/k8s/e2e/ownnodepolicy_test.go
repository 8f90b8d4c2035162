package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/generated/openapi"
	"sigs.k8s.io/yaml"
)

// The admission policy of deploy/manifests/ownnode.yaml type-checks against the Node schema as the
// controller manager checks it (its ValidatingAdmissionPolicy status controller): an expression that does
// not would fail every change of the agent. Runs without the cluster.
func TestTheOwnNodePolicyTypeChecks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "manifests", "ownnode.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	first, _, _ := strings.Cut(string(b), "\n---\n")
	if err := yaml.UnmarshalStrict([]byte(first), &policy); err != nil {
		t.Fatal(err)
	}
	checker := &validating.TypeChecker{
		SchemaResolver: resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, k8sscheme.Scheme),
		RestMapper:     testrestmapper.TestOnlyStaticRESTMapper(k8sscheme.Scheme),
	}
	if len(policy.Spec.Validations) == 0 {
		t.Fatal("the policy has no validations")
	}
	for _, w := range checker.Check(&policy) {
		t.Errorf("%s: %s", w.FieldRef, w.Warning)
	}
}
