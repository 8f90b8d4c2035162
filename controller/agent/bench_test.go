package agent_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
)

// BenchmarkAssignRelease measures one assign and one release through the unix socket with a warm pool; each
// includes the journal's fsync. It reports the p50 and p99 of each.
func BenchmarkAssignRelease(b *testing.B) {
	s := serve(b, 50, func(c *controller.Config) { c.Cooldown = time.Nanosecond })
	ctx := context.Background()
	var assign, release []time.Duration
	i := 0
	for b.Loop() {
		att := api.Attachment{ContainerID: fmt.Sprintf("bench-%d", i), IfName: "eth0"}
		i++
		t0 := time.Now()
		if _, err := s.client.Assign(ctx, api.AssignRequest{Attachment: att, Netns: "/var/run/netns/bench"}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.client.Release(ctx, api.ReleaseRequest{Attachment: att}); err != nil {
			b.Fatal(err)
		}
		assign = append(assign, t1.Sub(t0))
		release = append(release, time.Since(t1))
	}
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(float64(len(d))*p))].Nanoseconds())
	}
	b.ReportMetric(pct(assign, 0.50), "assign-p50-ns")
	b.ReportMetric(pct(assign, 0.99), "assign-p99-ns")
	b.ReportMetric(pct(release, 0.50), "release-p50-ns")
	b.ReportMetric(pct(release, 0.99), "release-p99-ns")
}
