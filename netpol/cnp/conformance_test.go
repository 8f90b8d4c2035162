package cnp

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/eniwire/eniwire/internal/cnpconformance"
)

func TestEveryClusterNetworkPolicyOfTheConformanceSuiteParses(t *testing.T) {
	for _, c := range cnpconformance.PoliciesForTest(t) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(c.JSON); err != nil {
			t.Fatalf("%s: %v", c.Where, err)
		}
		p, err := Parse(u)
		if err != nil {
			t.Errorf("%s: %v", c.Where, err)
			continue
		}
		if len(p.Warnings) > 0 {
			t.Errorf("%s: warnings %q", c.Where, p.Warnings)
		}
	}
	t.Logf("the %d ClusterNetworkPolicies of %s's conformance manifests parsed", cnpconformance.Count, cnpconformance.Module)
}
