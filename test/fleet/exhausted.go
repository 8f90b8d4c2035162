package fleet

// The exhausted scenario: a pod rollout (every node with as many pods as its secondary ENIs address with single
// IPs, waiting from the first moment) during which the nodes' own subnets run out, as they do when a cluster
// outgrows them. The VPC has a secondary block with pod subnets tagged kubernetes.io/role/cni=1 in the nodes'
// zone; once a quarter of the ENIs the rollout needs have been created, every node subnet is exhausted
// (ExhaustSubnet), so creates in flight are refused and the rest must go elsewhere. eniwire's
// subnet discovery (ENABLE_SUBNET_DISCOVERY) must carry on in the pod subnets: every pod starts, no ENI leaks,
// no IP is held twice.

import (
	"context"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// secondaryCapacity is what a node's secondary ENIs address with single IPs. The primary ENI sits in the
// node's subnet: when the subnet runs out before the primary got its IPs, no subnet discovery can give them,
// so the scenario asks only for what the secondary ENIs can hold wherever they are.
func secondaryCapacity(it ec2sim.InstanceType) int { return (it.MaxENIs - 1) * (it.IPv4PerENI - 1) }

// The pod subnets of the exhausted scenario, in the VPC's secondary block.
const (
	podBlock      = "100.64.0.0/16"
	tagCNIRole    = "kubernetes.io/role/cni"
	exhaustedFrac = 4 // the node subnets run out once 1/exhaustedFrac of the ENIs needed have been created
	// exhaustedWindow is how long the scenario may run at least (virtual).
	exhaustedWindow = 15 * time.Minute
)

var podSubnets = []ec2sim.SubnetSpec{
	{ID: "subnet-fleetpods0", VPCID: "vpc-fleet", CIDR: "100.64.0.0/17", AZ: "us-west-2a", Tags: map[string]string{tagCNIRole: "1"}},
	{ID: "subnet-fleetpods1", VPCID: "vpc-fleet", CIDR: "100.64.128.0/17", AZ: "us-west-2a", Tags: map[string]string{tagCNIRole: "1"}},
}

// addPodSubnets associates the secondary block and adds the pod subnets.
func (w *world) addPodSubnets() error {
	if _, err := w.sim.AddVPCCIDRBlock("vpc-fleet", podBlock); err != nil {
		return fmt.Errorf("associating %s: %w", podBlock, err)
	}
	for _, sn := range podSubnets {
		if err := w.sim.AddSubnet(sn); err != nil {
			return fmt.Errorf("adding pod subnet %s: %w", sn.ID, err)
		}
	}
	return nil
}

// exhaustDuring watches the rollout's creates from the first node's start and exhausts every node subnet once
// a quarter of the needed ENIs have been created (at least one). Creates come in bursts (a node plans all its
// ENIs at once), so it looks every millisecond of wall time rather than every pod tick. The returned stop ends
// the watch and returns the virtual second the subnets ran out (-1: they did not).
func (f *fleet) exhaustDuring(ctx context.Context, needed int) (stop func() (float64, error)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	at, errOut := -1.0, error(nil)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			created := int(f.w.sim.Counters()["CreateNetworkInterface"].Calls - f.base["CreateNetworkInterface"].Calls)
			if created > 0 && created*exhaustedFrac >= needed {
				at = f.now().Seconds()
				for _, id := range f.w.subnets {
					if _, err := f.w.sim.ExhaustSubnet(id, 0); err != nil {
						errOut = fmt.Errorf("exhausting %s: %w", id, err)
						return
					}
				}
				f.progress("node subnets exhausted after %d creates of the %d ENIs needed", created, needed)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() (float64, error) {
		cancel()
		<-done
		return at, errOut
	}
}

// enisInPodSubnets counts the attached secondary ENIs in the pod subnets.
func (f *fleet) enisInPodSubnets() int {
	in := map[string]bool{}
	for _, sn := range podSubnets {
		in[sn.ID] = true
	}
	n := 0
	for _, e := range f.w.sim.Snapshot().ENIs {
		if in[e.SubnetID] && e.Attachment != nil && e.Attachment.DeviceIndex != 0 {
			n++
		}
	}
	return n
}
