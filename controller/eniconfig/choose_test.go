package eniconfig

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestANodeNamesItsENIConfigAsTheAWSVPCCNIDoes(t *testing.T) {
	for _, tc := range []struct {
		name                string
		keys                keys
		labels, annotations map[string]string
		want, how           string
	}{
		{"by the label", defaultKeys, map[string]string{DefaultLabel: "a"}, nil, "a", "label"},
		{"by the annotation, over the label", defaultKeys, map[string]string{DefaultLabel: "a"}, map[string]string{DefaultAnnotation: "b"}, "b", "annotation"},
		{"by the external label, over both", defaultKeys, map[string]string{DefaultLabel: "a", ExternalLabel: "x"}, map[string]string{DefaultAnnotation: "b"}, "x", "label " + ExternalLabel},
		{"by neither: default", defaultKeys, map[string]string{"other": "a"}, nil, "default", "node has no label"},
		{"an empty value counts as none", defaultKeys, map[string]string{DefaultLabel: ""}, nil, "default", "node has no label"},
		{"an empty annotation key is not consulted", keys{label: "zone"}, map[string]string{"zone": "z"}, map[string]string{"": "b"}, "z", "label zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, how := tc.keys.nameFor(tc.labels, tc.annotations)
			if name != tc.want || !strings.Contains(how, tc.how) {
				t.Errorf("nameFor = %q, %q; want %q, %q", name, how, tc.want, tc.how)
			}
		})
	}
}

func TestAnENIConfigsSpecIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{"a subnet alone is enough", map[string]any{"subnet": "subnet-1"}, ""},
		{"subnet and groups", map[string]any{"subnet": "subnet-1", "securityGroups": []any{"sg-1"}}, ""},
		{"no subnet", map[string]any{"securityGroups": []any{"sg-1"}}, "spec.subnet"},
		{"a subnet that is no subnet id", map[string]any{"subnet": "10.0.0.0/24"}, "not a subnet id"},
		{"a subnet that is no string", map[string]any{"subnet": 7}, "spec.subnet"},
		{"a group that is no group id", map[string]any{"subnet": "subnet-1", "securityGroups": []any{"default"}}, "not a security group id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			u.SetName("x")
			p := parse(u)
			if tc.wantErr == "" && p.err != nil || tc.wantErr != "" && (p.err == nil || !strings.Contains(p.err.Error(), tc.wantErr)) {
				t.Errorf("parse: %v, want an error containing %q", p.err, tc.wantErr)
			}
		})
	}
}
