package controller_test

import (
	"errors"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// TestARestartedNodeServesFromItsJournalWhileEC2RefusesDescribe: after a restart, the journal replayed and
// the books' ENIs brought up are what a node needs to serve ADDs; the reconcile with EC2 runs in the
// background. So a restart is ready at once, even while EC2 refuses every Describe, and its ADDs are
// answered from the pool the books hold; a node whose books hold no ENI still waits for EC2's first answer.
func TestARestartedNodeServesFromItsJournalWhileEC2RefusesDescribe(t *testing.T) {
	w := newWorld(t, "m5.large", 50)
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget = 3
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "a warm pool", func() error {
		if st := r.node.Status(); st.Warm < 3 {
			return errors.New("fewer than 3 warm IPs")
		}
		return nil
	})
	r.stop()

	w.sim.Faults().SetProbability("DescribeNetworkInterfaces", ec2client.CodeUnauthorizedOperation, 1)
	r = w.start(cfg, nil, nil)
	defer r.stop()
	waitReady(t, r.node)
	if got := answer(t, "an ADD after the restart", addAsync(r.node, "after-restart")); got.err != nil {
		t.Fatalf("an ADD of the restarted node while EC2 refuses Describe: %v", got.err)
	}
	if calls := w.sim.Counters()["DescribeNetworkInterfaces"]; calls.Calls == 0 {
		t.Errorf("the restarted node never asked EC2 for its ENIs: the reconcile must still run in the background")
	}
}
