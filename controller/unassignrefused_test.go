package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestARefusedUnassignBacksOffAndItsIPsStayInThePool: IAM denies UnassignPrivateIpAddresses. The surplus the
// pool wants to give back stays on the ENI; the node must not send the refused call again every round (63
// denied calls in five virtual minutes, each with a Describe), its IPs must not stay out of the pool for
// ever, and its status says why nothing is released.
func TestARefusedUnassignBacksOffAndItsIPsStayInThePool(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget = 2
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	answered := map[string]string{}
	for i := range 6 {
		cid := fmt.Sprintf("pod-%d", i)
		answered[cid] = assignRetrying(t, r.node, cid).IP
	}
	w.settle(r, answered, 2)
	w.sim.Faults().SetProbability("UnassignPrivateIpAddresses", "UnauthorizedOperation", 1)
	for cid := range answered {
		releasePod(t, r.node, cid)
	}
	counters := w.sim.Counters()
	unassigns0, describes0 := counters["UnassignPrivateIpAddresses"].Calls, counters["DescribeNetworkInterfaces"].Calls
	w.passVirtual(5*time.Minute, nil)
	counters = w.sim.Counters()
	unassigns, describes := counters["UnassignPrivateIpAddresses"].Calls-unassigns0, counters["DescribeNetworkInterfaces"].Calls-describes0
	t.Logf("%d denied unassigns and %d describes in 5 virtual minutes", unassigns, describes)
	if unassigns > 12 {
		t.Errorf("%d denied unassigns in 5 virtual minutes (and %d describes): the refusal is sent again and again", unassigns, describes)
	}
	if unassigns == 0 {
		t.Fatal("no unassign was tried: the test tested nothing")
	}
	s := r.node.Status()
	if !strings.Contains(s.PoolStatus, "UnassignPrivateIpAddresses") || !strings.Contains(s.PoolStatus, "UnauthorizedOperation") {
		t.Errorf("pool status %q does not say that EC2 denies UnassignPrivateIpAddresses", s.PoolStatus)
	}
	// The IPs EC2 kept are the pool's: warm, not leaving for ever (a retried unassign may hold them out while
	// it is on the wire, under load for a moment).
	eventually(t, 10*time.Second, "the kept IPs warm", func() error {
		if s := r.node.Status(); s.Warm < 8 {
			return fmt.Errorf("%d warm IPs after the 6 pods left a pool of 8, want them all warm (EC2 still holds them on the ENI)", s.Warm)
		}
		return nil
	})
	// Once IAM allows it again, the surplus goes.
	w.sim.Faults().Reset()
	eventually(t, 30*time.Second, "the surplus released once EC2 accepts", func() error {
		if s := r.node.Status(); s.Warm > 2 {
			return fmt.Errorf("%d warm (%s)", s.Warm, s.PoolStatus)
		}
		return nil
	})
}
