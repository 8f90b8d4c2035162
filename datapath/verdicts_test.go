package datapath

import (
	"strings"
	"testing"
)

// TestEveryVerdictHasOneName: every verdict the programs count has a program and a name, and no two share
// both: they are the labels of eniwire_datapath_packets_total.
func TestEveryVerdictHasOneName(t *testing.T) {
	seen := map[string]Verdict{}
	for i := range numVerdicts {
		v := Verdict(i)
		if v.Program() == "unknown" || strings.HasPrefix(v.String(), "verdict-") || v.String() == "" {
			t.Errorf("verdict %d has no name (%s/%s)", i, v.Program(), v)
			continue
		}
		label := v.Program() + "/" + v.String()
		if other, ok := seen[label]; ok {
			t.Errorf("verdicts %d and %d are both %s", other, i, label)
		}
		seen[label] = v
	}
	if len(verdictNames) != numVerdicts {
		t.Errorf("%d verdict names for %d verdicts", len(verdictNames), numVerdicts)
	}
}
