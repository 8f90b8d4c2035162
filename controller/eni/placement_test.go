package eni_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

func TestAPlannedENIIsCreatedInItsPlacementsSubnetWithItsGroups(t *testing.T) {
	r := newRig(t, "m5.large")
	ctx := context.Background()
	if _, err := r.sim.AddVPCCIDRBlock(simworld.VPCID, "100.64.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if err := r.sim.AddSubnet(ec2sim.SubnetSpec{ID: "subnet-0000000000000a001", VPCID: simworld.VPCID, CIDR: "100.64.0.0/19", AZ: simworld.AZ}); err != nil {
		t.Fatal(err)
	}
	group, err := r.sim.AddSecurityGroup(ec2sim.SecurityGroupSpec{VPCID: simworld.VPCID, Name: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	at := eni.Placement{SubnetID: "subnet-0000000000000a001", SubnetCIDR: "100.64.0.0/19", SecurityGroups: []string{group}}
	op, err := r.m.Plan(ctx, 2, at)
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.onDisk(t, op); rec.SubnetID != at.SubnetID || rec.SubnetCIDR != at.SubnetCIDR || !slices.Equal(rec.SecurityGroups, at.SecurityGroups) {
		t.Fatalf("journaled plan in %s (%s) with %v, want the placement %+v", rec.SubnetID, rec.SubnetCIDR, rec.SecurityGroups, at)
	}
	if err := r.m.Advance(ctx, op); err != nil {
		t.Fatal(err)
	}
	rec, _ := r.m.Record(op)
	for _, e := range r.sim.Snapshot().ENIs {
		if e.ID == rec.ID && (e.SubnetID != at.SubnetID || !slices.Equal(e.Groups, at.SecurityGroups)) {
			t.Fatalf("EC2 created ENI %s in %s with %v, want %+v", e.ID, e.SubnetID, e.Groups, at)
		}
	}
	// The zero placement is the node's own subnet with the primary ENI's groups.
	op, err = r.m.Plan(ctx, 1, eni.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.onDisk(t, op); rec.SubnetID != r.inst.SubnetID || rec.SubnetCIDR != r.inst.SubnetCIDR || !slices.Equal(rec.SecurityGroups, r.inst.SecurityGroups) {
		t.Fatalf("plan without a placement in %s (%s) with %v, want the node's", rec.SubnetID, rec.SubnetCIDR, rec.SecurityGroups)
	}
}

// A full subnet answers a create with the code of the mode asked for (docs/ec2-facts.md, "Error codes"): both mean
// ErrSubnetFull, which moves the next ENI to another subnet.
func TestAFullSubnetsRefusalIsErrSubnetFullInBothModes(t *testing.T) {
	for _, c := range []struct {
		name     string
		keepFree int
		plan     func(r *rig) (string, error)
		code     string
	}{
		{"secondary IPs", 0, func(r *rig) (string, error) { return r.m.Plan(context.Background(), 2, eni.Placement{}) }, "InsufficientFreeAddressesInSubnet"},
		{"prefixes", 5, func(r *rig) (string, error) { return r.m.PlanPrefixes(context.Background(), 1, eni.Placement{}) }, "InvalidParameterValue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, "m5.large")
			if _, err := r.sim.ExhaustSubnet(r.inst.SubnetID, c.keepFree); err != nil {
				t.Fatal(err)
			}
			op, err := c.plan(r)
			if err != nil {
				t.Fatal(err)
			}
			err = r.m.Advance(context.Background(), op)
			if !errors.Is(err, ec2client.ErrSubnetFull) || ec2client.ErrorCode(err) != c.code {
				t.Fatalf("create in a full subnet: %v, want ErrSubnetFull with %s", err, c.code)
			}
			if _, ok := r.m.Record(op); ok {
				t.Errorf("the refused plan stayed in the books")
			}
		})
	}
}
