package controller_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// BenchmarkSetADD: the latency of an ADD (the controller's Assign, journal fsync included) of a pod of the
// default pool, of a pod whose security-group set has an ENI already, and of the first pod of a new set,
// which waits for one ENI commit (create, attach; the modify follows in the background) against the
// simulator at its default latency, the clock unscaled. The three are taken in turns, iteration by
// iteration, on one m5.4xlarge; each pod goes again before the next iteration, and a new set's ENI goes
// back (ENIWIRE_RELEASE_DELAY) before the next new set comes.
func BenchmarkSetADD(b *testing.B) {
	w := newWorld(b, "m5.4xlarge", 1)
	sets := &podSets{policy: "bench", byPrefix: map[string][]string{"warm-": {groupDBClients}}}
	w.withSetGroups()
	cfg := setsConfig(w.dir)
	cfg.ReleaseDelay = 200 * time.Millisecond
	cfg.Cooldown = time.Millisecond
	r := w.startWith(cfg, controller.Deps{PodSecurityGroups: sets})
	waitReady(b, r.node)
	assignPodRetrying(b, r.node, "warm-0") // the warm set's ENI, kept by this pod all along
	var dflt, warm, first []time.Duration
	timed := func(name string) time.Duration {
		start := time.Now()
		if _, err := assignPod(r.node, name); err != nil {
			b.Fatalf("assigning %s: %v", name, err)
		}
		took := time.Since(start)
		releasePod(b, r.node, name)
		return took
	}
	b.ResetTimer()
	for i := range b.N {
		dflt = append(dflt, timed(fmt.Sprintf("web-%d", i)))
		warm = append(warm, timed(fmt.Sprintf("warm-%d", i+1)))
		group := fmt.Sprintf("sg-0be4c0000000%05x", i)
		if _, err := w.sim.AddSecurityGroup(ec2sim.SecurityGroupSpec{ID: group, VPCID: w.inst.VPCID, Name: group}); err != nil {
			b.Fatal(err)
		}
		sets.byPrefix[fmt.Sprintf("new%d-", i)] = []string{group}
		first = append(first, timed(fmt.Sprintf("new%d-a", i)))
		eventually(b, 30*time.Second, "the new set's ENI goes back", func() error {
			if n := len(setENIs(r.node.Snapshot(), group)); n > 0 {
				return fmt.Errorf("%d ENIs of set %s", n, group)
			}
			return nil
		})
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(dflt), "default-p50-ms")
	b.ReportMetric(p50(warm), "set-with-ENI-p50-ms")
	b.ReportMetric(p50(first), "new-set-p50-ms")
	b.ReportMetric(p50(warm)/p50(dflt), "set-with-ENI/default")
}
