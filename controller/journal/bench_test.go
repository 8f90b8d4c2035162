package journal

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkSave measures one durable save of a node's state with 30 assignments; it reports p50 and p99.
func BenchmarkSave(b *testing.B) {
	s, _, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st := sample(30)
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := s.Save(st); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Nanoseconds()), "p99-ns")
}
