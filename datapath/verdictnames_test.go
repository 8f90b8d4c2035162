package datapath

import "testing"

// TestEveryVerdictHasItsOwnLabels: each counter the programs keep, policy verdicts included, is exported
// under a program and verdict label pair of its own, so the series are as many as the C enum's values and
// none is lost to a blank or shared label.
func TestEveryVerdictHasItsOwnLabels(t *testing.T) {
	seen := map[[2]string]Verdict{}
	for v := Verdict(0); int(v) < numVerdicts; v++ {
		labels := [2]string{v.Program(), v.String()}
		if labels[0] == "" || labels[1] == "" || labels[0] == "unknown" {
			t.Errorf("verdict %d has labels %q", v, labels)
		}
		if w, dup := seen[labels]; dup {
			t.Errorf("verdicts %d and %d share labels %q", w, v, labels)
		}
		seen[labels] = v
	}
	for _, v := range []Verdict{VerdictFromPodEgressDenied, VerdictToPodIngressDenied, VerdictForwardIngressAllowed} {
		if _, ok := seen[[2]string{v.Program(), v.String()}]; !ok {
			t.Errorf("policy verdict %d is not exported", v)
		}
	}
}
