package controller_test

import (
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// TestANodeStartingUnderDescribeThrottlingSendsEachTryOnceAndBacksOff: a rollout's nodes all start in the same
// seconds and share the account's describe bucket (100, then 20 a second). A node whose first reconcile EC2
// throttles sends its describe once per try, not once per try and per EC2-client retry, and waits longer after
// each throttled try (the reconcile is retried on the node's own schedule); once the throttling ends, the node
// is ready within one ReconcileInterval. (At 1,000 nodes, the client's retries of the first reconciles were
// 4,541 of the fleet's 9,654 describes before the last pod had its IP.)
func TestANodeStartingUnderDescribeThrottlingSendsEachTryOnceAndBacksOff(t *testing.T) {
	w := newWorld(t, "m5.large", 100)
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = -1
	w.sim.Faults().SetProbability("DescribeNetworkInterfaces", ec2client.CodeRequestLimitExceeded, 1)
	r := w.start(cfg, nil, nil)
	const throttled = 2 * time.Minute
	w.passVirtual(throttled, nil)
	calls := w.sim.Counters()["DescribeNetworkInterfaces"].Calls
	t.Logf("%d DescribeNetworkInterfaces in %s of throttling (ReconcileInterval %s)", calls, throttled, cfg.ReconcileInterval)
	// Tries at 0, then after a wait uniform in 0-20 s, then in 0-30 s: about 9 in two minutes; with the client's 6 attempts
	// a try and a try every 10 s, over 20.
	if calls > 12 {
		t.Errorf("%d describes in %s of throttling; want one per try, tries backing off", calls, throttled)
	}
	if calls < 3 {
		t.Errorf("%d describes in %s of throttling: the node stopped trying", calls, throttled)
	}
	if ok, _ := r.node.Ready(); ok {
		t.Fatalf("the node is ready while every describe is throttled")
	}
	w.sim.Faults().SetProbability("DescribeNetworkInterfaces", ec2client.CodeRequestLimitExceeded, 0)
	start := w.clk.Now()
	waitReady(t, r.node)
	if took := w.clk.Since(start); took > cfg.ReconcileInterval+5*time.Second {
		t.Errorf("ready %s after the throttling ended; want within the ReconcileInterval (%s)", took.Round(time.Second), cfg.ReconcileInterval)
	}
}
