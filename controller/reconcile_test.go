package controller_test

import (
	"fmt"
	"testing"
	"time"
)

// TestPoolWaitsForTheFirstReconcile: the pool's arithmetic counts the primary ENI, which only a reconcile puts
// in the books. A node whose first reconciles fail must not grow its pool meanwhile: it would plan one ENI too
// many, create it, find no device index for it and delete it (a wasted create and delete per node, as a
// 1,000-node rollout showed).
func TestPoolWaitsForTheFirstReconcile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
	}{
		{"with the first reconcile answered at once", 0},
		{"with the first two reconciles refused", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "m5.large", 500)
			if tc.failures > 0 {
				w.sim.Faults().Script("DescribeNetworkInterfaces", "UnauthorizedOperation", tc.failures)
			}
			cfg := fastConfig(w.dir)
			want := w.nodeInfo().Limits.MaxENIs - 1
			cfg.WarmENITarget = want + 1
			r := w.start(cfg, nil, nil)
			waitReady(t, r.node)
			eventually(t, 20*time.Second, "every secondary ENI ready", func() error {
				if ready := readySecondaries(r.node.Snapshot()); ready != want {
					return fmt.Errorf("%d of %d ready", ready, want)
				}
				return nil
			})
			c := w.sim.Counters()
			if n := c["DeleteNetworkInterface"].Calls; n != 0 {
				t.Errorf("DeleteNetworkInterface called %d times during a plain warm-up, want 0", n)
			}
			if n := c["CreateNetworkInterface"].Calls; n != int64(want) {
				t.Errorf("CreateNetworkInterface called %d times, want %d (one per secondary ENI)", n, want)
			}
		})
	}
}
