package conformance

import (
	"strings"
	"testing"
)

func TestTheReportGivesTheSpecsThatRanWithTheirOutcomeAndReason(t *testing.T) {
	results, err := ReadJUnit("testdata/junit.xml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Name: "[sig-network] DNS should provide DNS for services  [Conformance]", Status: "passed", Seconds: 21.5},
		{Name: "[sig-network] Services should serve a basic endpoint from pods  [Conformance]", Status: "failed", Seconds: 47, Message: "timed out waiting for the condition\nmore detail"},
		{Name: "[sig-network] Services should work after restarting kube-proxy [Disruptive]", Status: "skipped", Seconds: 0.2, Message: "skipped - Requires at least 3 nodes"},
	}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(results), len(want), results)
	}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("result %d: %+v, want %+v", i, results[i], want[i])
		}
	}
}

func TestTheTableHasARowPerSpecAndTheTotals(t *testing.T) {
	results, err := ReadJUnit("testdata/junit.xml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, "iptables", results); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| [sig-network] DNS should provide DNS for services  [Conformance] | passed | 21.5 |  |",
		"| failed | 47.0 | timed out waiting for the condition |",
		"Totals: 1 passed, 1 failed, 1 skipped; 69 spec-seconds",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("the table lacks %q:\n%s", line, b.String())
		}
	}
}

func TestEachBulletAtTheStartOfOutputIsASpecDone(t *testing.T) {
	var progress []string
	follow(strings.NewReader("Will run 3 of 7000 specs\n••\n• [FAILED] [1.0 seconds]\nnot • a spec\n"), func(f string, a ...any) {
		progress = append(progress, f)
	})
	if len(progress) != 4 { // the start and three specs; the bullet inside a line is no spec
		t.Errorf("progress lines: %d, want 4: %v", len(progress), progress)
	}
}

func TestTheLabelListIsDroppedOnlyWhenTheNameCarriesEveryLabel(t *testing.T) {
	for name, want := range map[string]string{
		"[sig-network] DNS x [Conformance] [sig-network, Conformance]": "[sig-network] DNS x [Conformance]",
		"[sig-network] Services y [sig-network]":                       "[sig-network] Services y",
		"[sig-network] Services z [Conformance]":                       "[sig-network] Services z [Conformance]",
		"[sig-network] Services w [sig-network, Slow]":                 "[sig-network] Services w [sig-network, Slow]",
	} {
		if got := withoutLabels(name); got != want {
			t.Errorf("withoutLabels(%q) = %q, want %q", name, got, want)
		}
	}
}
