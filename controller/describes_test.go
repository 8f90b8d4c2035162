package controller_test

import (
	"fmt"
	"testing"
	"time"
)

// TestAQuietNodesPeriodicReconcileMakesOneDescribe: a node at rest reconciles every ReconcileInterval with one
// DescribeNetworkInterfaces (its attached ENIs); the list of its own available ENIs, which only an operation of
// its own or someone else's detach leaves behind, is read one reconcile in ten. (Two describes per node a
// minute were the most of a 1,000-node fleet's describes: about 40,000 against the 2,000 its rollout needed.)
func TestAQuietNodesPeriodicReconcileMakesOneDescribe(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = -1
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
	w.passVirtual(10*time.Minute, nil)
	calls := w.sim.Counters()["DescribeNetworkInterfaces"].Calls - before
	// Ten minutes at 30 s are about 20 reconciles: 20 describes of the attached ENIs and 2 of the available ones.
	t.Logf("%d DescribeNetworkInterfaces in 10 virtual minutes of reconciles every %s", calls, cfg.ReconcileInterval)
	if calls > 26 {
		t.Fatalf("%d describes in 10 virtual minutes at rest; want about one per reconcile", calls)
	}
	if calls < 15 {
		t.Fatalf("%d describes in 10 virtual minutes: the periodic reconcile did not run", calls)
	}
}
