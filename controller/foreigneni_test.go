package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestAForeignENIOnTheInstanceCountsAgainstTheENILimit: an operator's ENI (or a trunk ENI, or another CNI's)
// takes one of an m5.large's three device indexes. The node wants more ENIs than the two left: it holds the
// one it can, never creates an ENI it cannot attach (and deletes it, and plans another, round after round),
// and its status names why it stops there.
func TestAForeignENIOnTheInstanceCountsAgainstTheENILimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		before bool // attached before the node starts, else while it runs
	}{
		{"attached before the node starts", true},
		{"attached while the node runs", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "m5.large", 200)
			attachForeign := func() string { return w.attachForeignENI(1) }
			var foreign string
			if c.before {
				foreign = attachForeign()
			}
			cfg := fastConfig(w.dir)
			if c.before {
				cfg.WarmENITarget = 3 // three ENIs' worth of free IPs: more than the two slots left can hold
			}
			r := w.start(cfg, nil, nil)
			waitReady(t, r.node)
			if !c.before {
				foreign = attachForeign()
				perENI := w.nodeInfo().Limits.IPv4PerENI - 1
				for i := range 2 * perENI {
					assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
				}
			}
			counters := w.sim.Counters()
			creates0, deletes0 := counters["CreateNetworkInterface"].Calls, counters["DeleteNetworkInterface"].Calls
			w.passVirtual(5*time.Minute, nil)
			counters = w.sim.Counters()
			creates, deletes := counters["CreateNetworkInterface"].Calls-creates0, counters["DeleteNetworkInterface"].Calls-deletes0
			if creates > 2 || deletes > 2 {
				t.Errorf("in 5 virtual minutes the node created %d ENIs and deleted %d: the foreign ENI's slot is not counted", creates, deletes)
			}
			if n := readySecondaries(r.node.Snapshot()); n != 1 {
				t.Errorf("the node holds %d secondary ENIs, want the 1 the slots left allow", n)
			}
			if s := r.node.Status().PoolStatus; !strings.Contains(s, foreign) {
				t.Errorf("pool status %q does not name the foreign ENI %s that holds the slot", s, foreign)
			}
		})
	}
}

// attachForeignENI creates an ENI as an operator would (no eniwire tags) and attaches it to the world's
// instance at deviceIndex; it returns its id.
func (w *world) attachForeignENI(deviceIndex int32) string {
	w.t.Helper()
	outsider := w.ec2(nil)
	ctx := context.Background()
	out, err := outsider.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(w.inst.SubnetID)})
	if err != nil {
		w.t.Fatal(err)
	}
	id := aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	if _, err := outsider.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id),
		InstanceId: aws.String(w.inst.ID), DeviceIndex: aws.Int32(deviceIndex)}); err != nil {
		w.t.Fatal(err)
	}
	return id
}
