package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
)

func pct(d []time.Duration, p float64) float64 {
	slices.Sort(d)
	return float64(d[min(len(d)-1, int(float64(len(d))*p))].Nanoseconds())
}

// BenchmarkAssignRelease measures one assign and one release through the unix socket with a warm pool, under
// each journal sync policy. It reports the p50 and p99 of each.
func BenchmarkAssignRelease(b *testing.B) {
	for _, policy := range []journal.SyncPolicy{journal.SyncAlways, journal.SyncBatched} {
		b.Run("sync="+policy.String(), func(b *testing.B) {
			s := serve(b, 50, func(c *controller.Config) { c.Cooldown = time.Nanosecond; c.JournalSync = policy })
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
			b.ReportMetric(pct(assign, 0.50), "assign-p50-ns")
			b.ReportMetric(pct(assign, 0.99), "assign-p99-ns")
			b.ReportMetric(pct(release, 0.50), "release-p50-ns")
			b.ReportMetric(pct(release, 0.99), "release-p99-ns")
		})
	}
}

// BenchmarkFsync is the disk's own cost of a durable append, the floor of a durable-per-assign policy: 200
// bytes written and fdatasync'd to a file in a temp dir (the same file system type as the journal's).
func BenchmarkFsync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "fsync"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec := make([]byte, 200)
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	b.ReportMetric(pct(d, 0.50), "p50-ns")
	b.ReportMetric(pct(d, 0.99), "p99-ns")
}
