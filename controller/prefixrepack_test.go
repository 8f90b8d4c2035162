package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// TestPrefixesComeBackAfterTheFallbackFilledEverySlot: in prefix mode on a fragmented subnet the single-IP
// fallback fills all 27 slots of an m5.large with pods' single IPs. Then the subnet frees /28s and some pods
// go. Growth needs a free slot, and only a free single IP can give one back: the node must repack (give free
// single IPs back so that their slots take /28s) once prefixes are tried again, and grow past the 27 pods
// kubelet's max pods of 110 allows, instead of staying at 27 with a retry time long past in its status.
func TestPrefixesComeBackAfterTheFallbackFilledEverySlot(t *testing.T) {
	w := newWorldIn(t, "m5.large", 200, ec2sim.SubnetSpec{ID: "subnet-1", VPCID: "vpc-1", CIDR: "10.0.64.0/24", AZ: "us-west-2a", Scatter: true})
	legacy := w.fragmentSubnet(120)
	r := w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	slots := w.nodeInfo().Limits.MaxENIs * (w.nodeInfo().Limits.IPv4PerENI - 1)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, slots)
	if prefixes, singles := slotsOf(r.node.Snapshot()); len(prefixes) != 0 || len(singles) != slots {
		t.Fatalf("books hold prefixes %v and %d single IPs, want the fallback's %d single IPs filling every slot", prefixes, len(singles), slots)
	}
	// The legacy node goes: the subnet has free /28s again. While pods hold every slot, the status says plainly
	// what the node can address, and no retry time long past as if it were to come.
	api := w.ec2(nil)
	for _, id := range legacy {
		if _, err := api.DeleteNetworkInterface(context.Background(), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)}); err != nil {
			t.Fatal(err)
		}
	}
	w.passVirtual(3*time.Minute, nil)
	s := r.node.Status()
	if want := fmt.Sprintf("%d slots hold single IPs, so the node addresses %d IPs, not max pods %d", slots, slots, s.MaxPods); !strings.Contains(s.PoolStatus, want) {
		t.Errorf("pool status %q does not say %q", s.PoolStatus, want)
	}
	if !strings.Contains(s.PrefixFallback, "at the next growth") {
		t.Errorf("prefix fallback status %q names a retry time that has passed as if it were to come", s.PrefixFallback)
	}
	// Ten pods go: once their cooldown is over, their slots can take /28s.
	for i := range 10 {
		cid := fmt.Sprintf("pod-%d", i)
		releasePod(t, r.node, cid)
		delete(answered, cid)
	}
	// Once their cooldown is over, the node gives their single IPs back and takes /28s in the slots, on its own:
	// the new pods below come after that, or a pod could take a cooled single IP first and the slot with it
	// (the pool hands free IPs to the pods that wait before the repack's round, by design).
	eventually(t, 30*time.Second, "a /28 in a slot a single IP gave back", func() error {
		if prefixes, singles := slotsOf(r.node.Snapshot()); len(prefixes) == 0 {
			s := r.node.Status()
			return fmt.Errorf("no prefix yet, %d single IPs (pool status %q; prefix fallback %q)", len(singles), s.PoolStatus, s.PrefixFallback)
		}
		return nil
	})
	// New pods: the node holds more than the 27 slots' single IPs once prefixes take the freed slots.
	for i := slots; i < slots+25; i++ {
		cid := fmt.Sprintf("pod-%d", i)
		var err error
		eventually(t, 30*time.Second, "assigning "+cid, func() error {
			_, err = r.node.Assign(context.Background(), assignReq(cid))
			if err != nil {
				s := r.node.Status()
				return fmt.Errorf("%d pods assigned: %v (pool status %q; prefix fallback %q)", len(answered), err, s.PoolStatus, s.PrefixFallback)
			}
			return nil
		})
		answered[cid] = r.node.Snapshot().Assignment(cid, "eth0").IP
	}
	if prefixes, _ := slotsOf(r.node.Snapshot()); len(prefixes) == 0 {
		t.Error("no prefix in the books after the repack")
	}
	if s := r.node.Status().PrefixFallback; s != "" {
		t.Errorf("status still says %q", s)
	}
	eventually(t, 20*time.Second, "books at rest", func() error { return w.checkBooks(r.node.Snapshot(), answered) })
}
