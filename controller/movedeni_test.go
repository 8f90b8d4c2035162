package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// TestAnENIMovedToAnotherInstanceLeavesThePool: someone detaches a secondary ENI that holds pods and attaches
// it to another instance, whose node may hand its IPs to pods of its own. The node must stop handing out
// the ENI's IPs, report its pods (their traffic is broken), keep their assignments, and take no new pod there.
func TestAnENIMovedToAnotherInstanceLeavesThePool(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	reg := prometheus.NewRegistry()
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget = 4
	node := w.startWith(cfg, controller.Deps{Registerer: reg}).node
	waitReady(t, node)
	moved := w.podsOnASecondary(t, node)
	var pods []string
	for _, a := range node.Snapshot().Assignments {
		if a.ENI == moved.ID {
			pods = append(pods, a.ContainerID)
		}
	}
	if len(pods) == 0 {
		t.Fatalf("no pod on ENI %s", moved.ID)
	}
	other, err := w.sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: w.inst.SubnetID})
	if err != nil {
		t.Fatal(err)
	}
	outsider := w.ec2(nil)
	ctx := context.Background()
	if _, err := outsider.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(moved.AttachmentID), Force: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := outsider.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(moved.ID),
		InstanceId: aws.String(other.ID), DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the moved ENI out of use", func() error {
		for _, e := range node.Snapshot().ENIs {
			if e.ID == moved.ID && e.Usable() {
				return fmt.Errorf("ENI %s, attached to %s, still usable in the books (%s)", e.ID, other.ID, e.State)
			}
		}
		return nil
	})
	eventually(t, 20*time.Second, "the moved ENI's pods reported", func() error {
		if v := gaugeValue(t, reg, "eniwire_pod_ips_missing_in_ec2"); int(v) != len(pods) {
			return fmt.Errorf("eniwire_pod_ips_missing_in_ec2 = %v, want the %d pods of the moved ENI", v, len(pods))
		}
		return nil
	})
	st := node.Snapshot()
	for _, cid := range pods {
		if a := st.Assignment(cid, "eth0"); a == nil || a.ENI != moved.ID {
			t.Errorf("the assignment of %s, a pod of the moved ENI, changed: %+v", cid, a)
		}
	}
	if e := st.ENIByID(moved.ID); e == nil || e.State != journal.Moved {
		t.Errorf("the moved ENI's record = %+v, want it kept, state %s, while pods hold its IPs", e, journal.Moved)
	}
	for i := range 6 {
		if a := assignRetrying(t, node, fmt.Sprintf("later-%d", i)); a.ENI == moved.ID {
			t.Fatalf("pod later-%d got %s of ENI %s, which is attached to %s", i, a.IP, moved.ID, other.ID)
		}
	}
	w.passVirtual(3*time.Minute, nil)
	if v := gaugeValue(t, reg, "eniwire_pod_ips_missing_in_ec2"); int(v) != len(pods) {
		t.Errorf("minutes later, eniwire_pod_ips_missing_in_ec2 = %v, want the %d pods of the moved ENI still reported", v, len(pods))
	}
	for _, cid := range pods {
		if _, err := node.Release(ctx, api0Release(cid)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "the moved ENI forgotten with its last pod", func() error {
		if e := node.Snapshot().ENIByID(moved.ID); e != nil {
			return fmt.Errorf("ENI %s still in the books (%s)", e.ID, e.State)
		}
		if v := gaugeValue(t, reg, "eniwire_pod_ips_missing_in_ec2"); v != 0 {
			return fmt.Errorf("eniwire_pod_ips_missing_in_ec2 = %v", v)
		}
		return nil
	})
	if e, _ := w.sim.ENI(moved.ID); e.Attachment == nil || e.Attachment.InstanceID != other.ID {
		t.Errorf("the moved ENI is no longer attached to %s: %+v", other.ID, e.Attachment)
	}
}
