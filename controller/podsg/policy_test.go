package podsg

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestParseKeepsAWellFormedPolicyAndRefusesAMalformedOneWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   map[string]any
		groups []string // nil: refused
		err    string
	}{
		{"groups are sorted and de-duplicated", policySpec(map[string]string{"app": "web"}, nil, sgB, sgA, sgB), []string{sgA, sgB}, ""},
		{"an old 8-digit group id is one", policySpec(map[string]string{}, nil, "sg-0123abcd"), []string{"sg-0123abcd"}, ""},
		{"a group id of another length is not", policySpec(map[string]string{}, nil, sgA, "sg-0123abc"), nil, `"sg-0123abc"`},
		{"upper-case hex is not a group id", policySpec(map[string]string{}, nil, "sg-0123ABCD"), nil, `"sg-0123ABCD"`},
		{"a group name is not a group id", policySpec(map[string]string{}, nil, "default", sgA, "web"), nil, `"default", "web": not security group ids`},
		{"no groups", policySpec(map[string]string{}, nil), nil, "spec.securityGroups.groupIds is empty"},
		{"no securityGroups at all", map[string]any{"podSelector": map[string]any{}}, nil, "spec.securityGroups.groupIds is empty"},
		{"no selector", policySpec(nil, nil, sgA), nil, "neither spec.podSelector nor spec.serviceAccountSelector"},
		{"no spec", nil, nil, "neither spec.podSelector nor spec.serviceAccountSelector"},
		{"a selector's unknown operator", map[string]any{
			"podSelector":    map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Like", "values": []any{"w"}}}},
			"securityGroups": map[string]any{"groupIds": []any{sgA}}}, nil, "spec.podSelector"},
		{"groupIds of the wrong type", map[string]any{"podSelector": map[string]any{}, "securityGroups": map[string]any{"groupIds": sgA}},
			nil, "spec:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parse(sgp("shop", "p", tc.spec))
			if p.name != "shop/p" {
				t.Errorf("name %q", p.name)
			}
			if tc.groups != nil {
				if p.err != nil || !slices.Equal(p.groups, tc.groups) {
					t.Fatalf("groups %v, err %v; want %v", p.groups, p.err, tc.groups)
				}
				return
			}
			if p.err == nil || !strings.Contains(p.err.Error(), tc.err) {
				t.Fatalf("err %v, want one saying %q", p.err, tc.err)
			}
			if p.groups != nil || p.pods != nil || p.accounts != nil {
				t.Errorf("a refused policy keeps a part of itself: groups %v, selectors %v %v", p.groups, p.pods, p.accounts)
			}
			if ok, _ := p.selects(labels.Set{"app": "web"}, func() (labels.Set, error) { return nil, nil }); ok {
				t.Error("a refused policy selects a pod")
			}
		})
	}
}
