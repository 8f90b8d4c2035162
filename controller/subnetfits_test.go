package controller_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
)

// TestGrowthForWaitingPodsTheSubnetCannotHoldAsksAgainForWhatFits: growth sized for the pods waiting asks a
// nearly full subnet for more addresses than it holds, and EC2 refuses the whole request
// (InsufficientFreeAddressesInSubnet). The pool asks again at once for what the subnet still has, instead of
// pausing a minute while those addresses are free there (issue 36 item 16). Here the subnet has 2 free and 4
// ADDs come: the warm IP and the subnet's 2 serve 3 of them within seconds, long before the pause would end.
func TestGrowthForWaitingPodsTheSubnetCannotHoldAsksAgainForWhatFits(t *testing.T) {
	w := newWorld(t, "m5.large", 5)
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget, cfg.AddWait = 1, 10*time.Minute
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the warm pool", func() error {
		if s := r.node.Status(); s.Warm != 1 || len(s.Pending) > 0 {
			return fmt.Errorf("%d warm, %d pending", s.Warm, len(s.Pending))
		}
		return nil
	})
	if _, err := w.sim.ExhaustSubnet("subnet-1", 2); err != nil {
		t.Fatal(err)
	}
	start := w.clk.Now()
	var adds []<-chan addAnswer
	for i := range 4 {
		adds = append(adds, addAsync(r.node, fmt.Sprintf("pod-%d", i)))
	}
	served, refused := 0, 0
	eventually(t, 60*time.Second, "3 of the 4 ADDs served", func() error {
		for i, add := range adds {
			select {
			case a := <-add:
				if a.err == nil {
					served++
					break
				}
				// The subnet holds 3 addresses for 4 pods: the one that comes once they are gone is answered
				// at once with the cause, as it should be.
				if refused++; !errors.Is(a.err, controller.ErrNoIP) || refused > 1 {
					t.Fatalf("pod-%d: %v (%d refused)", i, a.err, refused)
				}
			default:
			}
		}
		if served < 3 {
			return fmt.Errorf("%d served", served)
		}
		return nil
	})
	// The pool's pause after a refusal is a minute at least; what fits came without one.
	if took := w.clk.Since(start); took >= time.Minute {
		t.Fatalf("3 ADDs served %s of virtual time after they came, want well under the minute a refusal pauses the pool", took.Round(time.Second))
	}
	c := w.sim.Counters()["AssignPrivateIpAddresses"]
	t.Logf("3 ADDs served in %s of virtual time; AssignPrivateIpAddresses %+v", w.clk.Since(start).Round(time.Second), c)
}
