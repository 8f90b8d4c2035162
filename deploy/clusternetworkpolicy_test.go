package deploy

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	"github.com/eniwire/eniwire/internal/cnpconformance"
)

// cnpVersions are the versions of the ClusterNetworkPolicy API the CRD serves, the stored one first.
var cnpVersions = []string{"v1beta1", "v1alpha2"}

// cnpSchemas checks the ClusterNetworkPolicy CRD as any CRD (checkCRD) and returns its versions' schemas.
func cnpSchemas(t *testing.T) map[string]crdSchema {
	t.Helper()
	return checkCRD(t, cnpGroup, cnpPlural, "ClusterNetworkPolicy", apiextensionsv1.ClusterScoped, cnpVersions[0], cnpVersions[1:]...)
}

func TestTheClusterNetworkPolicyCRDIsTheNetworkPolicyAPIs(t *testing.T) {
	schemas := cnpSchemas(t)
	if !reflect.DeepEqual(schemas[cnpVersions[0]].root, schemas[cnpVersions[1]].root) {
		t.Errorf("the schemas of %v differ; the API has one schema for both", cnpVersions)
	}
	crd := crdNamed(t, cnpPlural+"."+cnpGroup)
	if !slices.Equal(crd.Spec.Names.ShortNames, []string{"cnp"}) || crd.Spec.Names.Singular != "clusternetworkpolicy" {
		t.Errorf("names %+v, want singular clusternetworkpolicy and short name cnp, as the API's", crd.Spec.Names)
	}
	for _, v := range crd.Spec.Versions {
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("version %s has no status subresource; implementations report on a policy through it", v.Name)
		}
	}
	spec := schemas[cnpVersions[0]].spec()
	if !slices.Equal(spec.Required, []string{"tier", "priority", "subject"}) {
		t.Errorf("spec requires %v, want tier, priority and subject", spec.Required)
	}
}

// The API's conformance suite is the API's own word on what a valid policy is: the CRD must admit every one
// of its policies, in both versions, as written (nothing pruned).
func TestEveryClusterNetworkPolicyOfTheConformanceSuiteIsValid(t *testing.T) {
	schemas := cnpSchemas(t)
	policies := cnpconformance.PoliciesForTest(t)
	for _, version := range cnpVersions {
		t.Run(version, func(t *testing.T) {
			for _, p := range policies {
				obj := decodeJSONObject(t, p.JSON)
				obj["apiVersion"] = cnpGroup + "/" + version
				if problems := admit(schemas[version].structural, obj); len(problems) > 0 {
					t.Errorf("%s: %s", p.Where, strings.Join(problems, "; "))
				}
			}
		})
	}
}

func TestTheClusterNetworkPolicySchemaRefusesWhatTheAPIForbids(t *testing.T) {
	schemas := cnpSchemas(t)
	// valid is a policy the schema admits; each case below breaks it in one place.
	const valid = `{"apiVersion": "policy.networking.k8s.io/v1beta1", "kind": "ClusterNetworkPolicy",
		"metadata": {"name": "web"},
		"spec": {"tier": "Admin", "priority": 10, "subject": {"namespaces": {}},
			"ingress": [{"name": "from-monitoring", "action": "Accept",
				"from": [{"namespaces": {"matchLabels": {"team": "monitoring"}}}],
				"protocols": [{"tcp": {"destinationPort": {"number": 8080}}}]}]}}`
	for _, tc := range []struct {
		what  string
		field string // where the API server says the policy is wrong
		spoil func(spec, rule map[string]any)
	}{
		{"a tier other than Admin and Baseline", "spec.tier", func(spec, _ map[string]any) { spec["tier"] = "Other" }},
		{"a priority above 1000", "spec.priority", func(spec, _ map[string]any) { spec["priority"] = int64(1001) }},
		{"more than 25 ingress rules", "spec.ingress", func(spec, rule map[string]any) {
			spec["ingress"] = slices.Repeat([]any{rule}, 26)
		}},
		{"a peer of two fields", "spec.ingress[0].from[0]", func(_, rule map[string]any) {
			rule["from"] = []any{map[string]any{"namespaces": map[string]any{}, "pods": map[string]any{"podSelector": map[string]any{}}}}
		}},
		{"port 0", "spec.ingress[0].protocols[0].tcp.destinationPort.number", func(_, rule map[string]any) {
			rule["protocols"] = []any{map[string]any{"tcp": map[string]any{"destinationPort": map[string]any{"number": int64(0)}}}}
		}},
		{"an action other than Accept, Deny and Pass", "spec.ingress[0].action", func(_, rule map[string]any) { rule["action"] = "Allow" }},
	} {
		for _, version := range cnpVersions {
			t.Run(tc.what+" is invalid in "+version, func(t *testing.T) {
				policy := decodeJSONObject(t, []byte(valid))
				policy["apiVersion"] = cnpGroup + "/" + version
				s := schemas[version].structural
				if problems := admit(s, policy); len(problems) > 0 {
					t.Fatalf("the policy to break is not valid: %v", problems)
				}
				spec := policy["spec"].(map[string]any)
				tc.spoil(spec, spec["ingress"].([]any)[0].(map[string]any))
				problems := admit(s, policy)
				if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, tc.field+" ") }) {
					t.Errorf("problems %q, want one of %s", problems, tc.field)
				}
			})
		}
	}
}

// admit returns what the API server finds wrong with a custom resource under its version's schema: the
// fields it would prune as unknown (`kubectl apply --validate=strict` refuses them) and the values it
// refuses. The schema's CEL rules (x-kubernetes-validations) are not evaluated: that takes the API
// server's CEL environment, which this module does not build.
func admit(s *structuralschema.Structural, obj map[string]any) []string {
	var problems []string
	for _, field := range pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		problems = append(problems, field+" is unknown")
	}
	for _, err := range validate.NewSchemaValidator(s.ToKubeOpenAPI(), nil, "", strfmt.Default).Validate(obj).Errors {
		problems = append(problems, err.Error())
	}
	return problems
}

// decodeJSONObject decodes a JSON object as the API server does, integers as int64.
func decodeJSONObject(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := utiljson.Unmarshal(doc, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}
