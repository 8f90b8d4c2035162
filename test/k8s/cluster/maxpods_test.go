package cluster

import "testing"

// The nodes' kubelets get AWS's published max pods (eni-max-pods.txt; 110 for an m5.large with prefixes).
func TestMaxPodsIsTheInstanceTypesPublishedValue(t *testing.T) {
	for _, tc := range []struct {
		typ      string
		prefixes bool
		want     int
	}{{"m5.large", false, 29}, {"m5.xlarge", false, 58}, {"m5.large", true, 110}, {"m5.xlarge", true, 110}} {
		got, err := MaxPods(tc.typ, tc.prefixes)
		if err != nil || got != tc.want {
			t.Errorf("MaxPods(%s, prefixes %v) = %d, %v; want %d", tc.typ, tc.prefixes, got, err, tc.want)
		}
	}
	if _, err := MaxPods("no.such", false); err == nil {
		t.Error("an unknown instance type gave no error")
	}
}
