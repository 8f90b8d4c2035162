package dpbench

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDatapaths runs the whole comparison once and prints the method, the table and the JSON lines.
// Run it with -benchtime 1x: one pass takes a few minutes. Figures are printed, never asserted.
func BenchmarkDatapaths(b *testing.B) {
	requireTools(b)
	knp := filepath.Join(b.TempDir(), "knp")
	if err := BuildKNP(b.Context(), "knp", knp); err != nil {
		b.Fatal(err)
	}
	var rep *Report
	for b.Loop() {
		var err error
		if rep, err = Run(b.Context(), Options{Progress: os.Stderr, KNP: knp}); err != nil {
			b.Fatal(err)
		}
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		b.Fatal(err)
	}
	if err := rep.WriteJSONLines(os.Stdout); err != nil {
		b.Fatal(err)
	}
	last := rep.Options.Sizes[len(rep.Options.Sizes)-1]
	b.ReportMetric(rep.Worst("eniwire", Direct.Name, "tcp"), "eniwire/plain-tcp-worst")
	b.ReportMetric(rep.Worst("eniwire", Direct.Name, "rr"), "eniwire/plain-rr-worst")
	b.ReportMetric(rep.Worst("eniwire", Direct.Name, "p50"), "eniwire/plain-p50-worst")
	b.ReportMetric(rep.Worst("eniwire", Service.Name, "tcp"), "eniwire/plain-service-tcp-worst")
	b.ReportMetric(rep.Worst("eniwire", Service.Name, "rr"), "eniwire/plain-service-rr-worst")
	b.ReportMetric(rep.Worst("eniwire", Direct6.Name, "tcp"), "eniwire/plain-ipv6-tcp-worst")
	b.ReportMetric(rep.Worst("eniwire", Direct6.Name, "rr"), "eniwire/plain-ipv6-rr-worst")
	b.ReportMetric(rep.Worst("eniwire", Direct6.Name, "p50"), "eniwire/plain-ipv6-p50-worst")
	b.ReportMetric(rep.Flatness("eniwire"), "eniwire-rr-flatness")
	b.ReportMetric(rep.row("vpc-cni", Direct.Name, last).RRRatio, "vpccni/plain-rr-at-max")
	b.ReportMetric(rep.ProgNs[last], "from_pod-ns/pkt-at-max")
	b.ReportMetric(rep.policyRow((&EniwirePolicy{}).Name()).TCPRatio, "eniwire-policy/none-tcp")
	b.ReportMetric(rep.policyRow((&EniwirePolicy{}).Name()).CRRRatio, "eniwire-policy/none-crr")
	b.ReportMetric(rep.policyRow((&KubeNetworkPolicies{}).Name()).TCPRatio, "knp/none-tcp")
	b.ReportMetric(rep.policyRow((&KubeNetworkPolicies{}).Name()).CRRRatio, "knp/none-crr")
}
