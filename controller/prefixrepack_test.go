package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller/nodeready"
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
	w.deleteENIs(legacy)
	w.passVirtual(3*time.Minute, nil)
	s := r.node.Status()
	if want := fmt.Sprintf("%d slots hold single IPs, so the node can address %d pods, not max pods %d", slots, slots, s.MaxPods); !strings.Contains(s.PoolStatus, want) {
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

// TestTwoSlotsOfLivePodsSayWhatTheNodeAddresses: a t3.micro in prefix mode has two slots (two ENIs of two
// IPv4 addresses: kubelet's max pods is 34, two /28s and two). On a fragmented subnet the single-IP fallback
// gives both to pods, and the subnet then frees /28s while those pods live: the node addresses 2 pods. The
// Node condition says so (how many pods the node can address, against max pods) for as long as both pods
// live; once one goes and its address cools down, its slot takes a /28 and the node addresses 17 pods.
func TestTwoSlotsOfLivePodsSayWhatTheNodeAddresses(t *testing.T) {
	w := newWorldIn(t, "t3.micro", 200, ec2sim.SubnetSpec{ID: "subnet-1", VPCID: "vpc-1", CIDR: "10.0.64.0/24", AZ: "us-west-2a", Scatter: true})
	legacy := w.fragmentSubnet(120)
	r := w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 2)
	if prefixes, singles := slotsOf(r.node.Snapshot()); len(prefixes) != 0 || len(singles) != 2 {
		t.Fatalf("books hold prefixes %v and single IPs %v, want the fallback's 2 single IPs in the 2 slots", prefixes, singles)
	}
	w.deleteENIs(legacy)
	w.passVirtual(3*time.Minute, nil)
	s := r.node.Status()
	if s.MaxPods != 34 {
		t.Fatalf("max pods %d, want 34 for a t3.micro in prefix mode", s.MaxPods)
	}
	v := nodeready.Judge(s)
	if want := "2 slots hold single IPs, so the node can address 2 pods, not max pods 34"; v.Ready || !strings.Contains(v.Message, want) {
		t.Errorf("Node condition ready=%v %s: %q, want not ready saying %q", v.Ready, v.Reason, v.Message, want)
	}
	if _, err := r.node.Assign(context.Background(), assignReq("pod-2")); err == nil {
		t.Fatal("a third pod got an address while both slots hold live pods' single IPs")
	}
	releasePod(t, r.node, "pod-2") // its ADD failed: the runtime's DEL
	releasePod(t, r.node, "pod-0")
	delete(answered, "pod-0")
	eventually(t, 30*time.Second, "a /28 in the slot pod-0 gave back", func() error {
		if prefixes, singles := slotsOf(r.node.Snapshot()); len(prefixes) == 0 {
			s := r.node.Status()
			return fmt.Errorf("no prefix yet, single IPs %v (pool status %q; prefix fallback %q)", singles, s.PoolStatus, s.PrefixFallback)
		}
		return nil
	})
	// The /28 addresses 16 pods beside pod-1's single IP.
	for i := 3; i < 3+16; i++ {
		cid := fmt.Sprintf("pod-%d", i)
		answered[cid] = assignRetrying(t, r.node, cid).IP
	}
	if want := "1 slot holds single IPs, so the node can address 17 pods, not max pods 34"; !strings.Contains(nodeready.Judge(r.node.Status()).Message, want) {
		t.Errorf("Node condition after the repack says %q, want %q (pod-1 still holds its slot)", nodeready.Judge(r.node.Status()).Message, want)
	}
	eventually(t, 20*time.Second, "books at rest", func() error { return w.checkBooks(r.node.Snapshot(), answered) })
}

// deleteENIs deletes the ENIs ids (another node's, say) behind the agent's back: their addresses go back to
// the subnet.
func (w *world) deleteENIs(ids []string) {
	w.t.Helper()
	api := w.ec2(nil)
	for _, id := range ids {
		if _, err := api.DeleteNetworkInterface(context.Background(), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)}); err != nil {
			w.t.Fatalf("deleting ENI %s: %v", id, err)
		}
	}
}
