package controller_test

import (
	"fmt"
	"testing"
	"time"
)

// TestAQuietNodesReconcilesComeLessOftenWithOneDescribeEach: a node at rest reconciles with one
// DescribeNetworkInterfaces (its attached ENIs), and each reconcile that finds the books and EC2 agreeing
// doubles the interval up to MaxReconcileInterval; the list of its own available ENIs, which only an operation
// of its own or someone else's detach leaves behind, is read one reconcile in ten. (Two describes per node a
// minute were the most of a 1,000-node fleet's describes: about 40,000 against the 2,000 its rollout needed.)
func TestAQuietNodesReconcilesComeLessOftenWithOneDescribeEach(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval, cfg.MaxReconcileInterval = -1, 5*time.Minute
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	assignRetrying(t, r.node, "pod-0")
	eventually(t, 20*time.Second, "the pool at rest", func() error {
		if p := r.node.Status().Pending; len(p) > 0 {
			return fmt.Errorf("pending: %+v", p)
		}
		return nil
	})
	before := w.sim.Counters()["DescribeNetworkInterfaces"].Calls
	w.passVirtual(30*time.Minute, nil)
	calls := w.sim.Counters()["DescribeNetworkInterfaces"].Calls - before
	// 30 s, 1, 2, 4 min, then every 5: about 9 reconciles in 30 minutes, one describe each (and one list of the
	// available ENIs); at a fixed 30 s with two describes each, 120.
	t.Logf("%d DescribeNetworkInterfaces in 30 virtual minutes at rest (ReconcileInterval %s, MaxReconcileInterval %s)",
		calls, cfg.ReconcileInterval, cfg.MaxReconcileInterval)
	if calls > 14 {
		t.Fatalf("%d describes in 30 virtual minutes at rest; want about one per reconcile, and fewer reconciles", calls)
	}
	if calls < 5 {
		t.Fatalf("%d describes in 30 virtual minutes: the periodic reconcile did not run", calls)
	}
}
