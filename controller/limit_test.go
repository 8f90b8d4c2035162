package controller_test

import (
	"fmt"
	"testing"
	"time"
)

// TestAnENILimitLearnedFromARefusalIsRaisedAgain: one AttachmentLimitExceeded below the instance type's
// limit (EC2 counting an ENI still detaching, say) lowers the node's limit to what EC2 then shows attached.
// That limit must not hold for ever: the node tries again later and gets every ENI its targets ask for.
func TestAnENILimitLearnedFromARefusalIsRaisedAgain(t *testing.T) {
	w := newWorld(t, "m5.large", 500)
	w.sim.Faults().Script("AttachNetworkInterface", "AttachmentLimitExceeded", 1)
	cfg := fastConfig(w.dir)
	want := w.nodeInfo().Limits.MaxENIs - 1
	cfg.WarmENITarget = want + 1
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	eventually(t, 30*time.Second, "every secondary ENI ready after the refusal", func() error {
		if ready := readySecondaries(r.node.Snapshot()); ready != want {
			return fmt.Errorf("%d of %d ready; limit %d (%s)", ready, want, r.node.Status().MaxENIs, r.node.Status().PoolStatus)
		}
		return nil
	})
	if got := r.node.Status().MaxENIs; got != w.nodeInfo().Limits.MaxENIs {
		t.Errorf("ENI limit %d, want the type's %d again", got, w.nodeInfo().Limits.MaxENIs)
	}
}
