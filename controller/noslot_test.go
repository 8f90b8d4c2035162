package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller/api"
)

// TestAnENIHoldingPodsIsNeverDeletedForWantOfASlot: someone detaches our ENI that pods use, and foreign ENIs
// take every free device index. The node finds no slot to attach it again; it must not delete an ENI whose
// IPs pods hold (EC2 would give their addresses to others): it reports and waits, and attaches it again once
// a slot frees.
func TestAnENIHoldingPodsIsNeverDeletedForWantOfASlot(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	perENI := w.nodeInfo().Limits.IPv4PerENI - 1
	var onSecondary string
	for i := range perENI + 2 {
		a := assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
		if prim := primaryID(r.node.Snapshot()); a.ENI != prim {
			onSecondary = a.ENI
		}
	}
	if onSecondary == "" {
		t.Fatal("no pod on a secondary ENI")
	}
	eventually(t, 10*time.Second, "the pool at rest", func() error {
		if p := r.node.Status().Pending; len(p) > 0 {
			return fmt.Errorf("pending: %+v", p)
		}
		return nil
	})
	outsider := w.ec2(nil)
	ctx := context.Background()
	// Someone detaches our ENI and foreign ENIs take every free device index. The node may attach its ENI
	// again before they are all in (its clock runs 200 times faster): then the outsider detaches it again.
	var foreign, spare []string
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			t.Fatalf("the foreign ENIs never took every free device index before the node attached %s again", onSecondary)
		}
		if e, _ := w.sim.ENI(onSecondary); e.Attachment != nil {
			if _, err := outsider.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(e.Attachment.ID)}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the detach done", func() error {
				if e, _ := w.sim.ENI(onSecondary); e.Attachment != nil {
					return fmt.Errorf("still %s", e.Attachment.Status)
				}
				return nil
			})
		}
		used := map[int]bool{}
		for _, e := range w.sim.Snapshot().ENIs {
			if e.Attachment != nil && e.Attachment.InstanceID == w.inst.ID {
				used[e.Attachment.DeviceIndex] = true
			}
		}
		raced := false
		for idx := 1; idx < w.nodeInfo().Limits.MaxENIs && !raced; idx++ {
			if used[idx] {
				continue
			}
			if len(spare) == 0 {
				out, err := outsider.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(w.inst.SubnetID)})
				if err != nil {
					t.Fatal(err)
				}
				spare = append(spare, aws.ToString(out.NetworkInterface.NetworkInterfaceId))
			}
			id := spare[0]
			if _, err := outsider.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id),
				InstanceId: aws.String(w.inst.ID), DeviceIndex: aws.Int32(int32(idx))}); err != nil {
				raced = true
				continue
			}
			spare, foreign = spare[1:], append(foreign, id)
		}
		if !raced {
			break
		}
	}
	w.passVirtual(5*time.Minute, func() {
		if _, ok := w.sim.ENI(onSecondary); !ok {
			t.Fatalf("ENI %s, whose IPs pods hold, was deleted for want of a device index", onSecondary)
		}
	})
	if a := r.node.Snapshot().Assignment(fmt.Sprintf("pod-%d", perENI+1), "eth0"); a == nil || a.ENI != onSecondary {
		t.Fatalf("the assignment on %s is gone: %+v", onSecondary, a)
	}
	if s := r.node.Status(); !pendingSays(s.Pending, onSecondary, "device index") {
		t.Errorf("status does not say why %s waits: %+v", onSecondary, s.Pending)
	}
	// A slot frees: the node attaches its ENI again.
	f, _ := w.sim.ENI(foreign[0])
	if _, err := outsider.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(f.Attachment.ID)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ENI attached again", func() error {
		if e, _ := w.sim.ENI(onSecondary); e.Attachment == nil || e.Attachment.InstanceID != w.inst.ID {
			return errors.New("not yet")
		}
		return nil
	})
}

// pendingSays reports whether the status's pending operation of eniID names what.
func pendingSays(ops []api.PendingOp, eniID, what string) bool {
	for _, op := range ops {
		if op.ENI == eniID && strings.Contains(op.Error, what) {
			return true
		}
	}
	return false
}
