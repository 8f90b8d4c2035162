package controller_test

import (
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// TestThePrefixFallbackNamesTheSubnetThatRefused: with custom networking the pods' ENIs are in the
// ENIConfig's subnet, which is fragmented and refuses prefixes. The fallback's status and its advice (a CIDR
// reservation) must name that subnet, not the node's own, which never refused anything.
func TestThePrefixFallbackNamesTheSubnetThatRefused(t *testing.T) {
	const fragmented = "subnet-000000000000f0001"
	w := newWorld(t, "m5.large", 200)
	if _, err := w.sim.AddVPCCIDRBlock("vpc-1", "100.64.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if err := w.sim.AddSubnet(ec2sim.SubnetSpec{ID: fragmented, VPCID: "vpc-1", CIDR: "100.64.0.0/24", AZ: "us-west-2a", Scatter: true}); err != nil {
		t.Fatal(err)
	}
	w.fragment(fragmented, 120)
	src := &fakeENIConfigs{}
	src.set(subnet.ENIConfig{Name: "us-west-2a", Subnet: fragmented}, true, "", nil)
	cfg := prefixConfig(w.dir)
	cfg.CustomNetworking = true
	r := w.startWith(cfg, controller.Deps{Node: w.podNode(), ENIConfigs: src})
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 3)
	if c := w.sim.Counters()["CreateNetworkInterface"].Errors["InsufficientCidrBlocks"]; c == 0 {
		t.Fatal("EC2 never refused a prefix in the ENIConfig's subnet: the test tested nothing")
	}
	s := r.node.Status().PrefixFallback
	if !strings.Contains(s, fragmented) {
		t.Errorf("prefix fallback status %q does not name %s, the subnet that refused", s, fragmented)
	}
	if strings.Contains(s, w.inst.SubnetID) {
		t.Errorf("prefix fallback status %q names the node's subnet %s, which refused nothing", s, w.inst.SubnetID)
	}
}
