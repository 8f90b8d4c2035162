package eni_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// createTagged creates an available ENI in the rig's subnet with our tags for owner, created at created.
func (r *rig) createTagged(t *testing.T, owner, cluster string, created time.Time) string {
	t.Helper()
	tags := []types.Tag{
		{Key: aws.String(eni.TagOwner), Value: aws.String(owner)},
		{Key: aws.String(eni.TagCreatedAt), Value: aws.String(created.UTC().Format(time.RFC3339))},
		{Key: aws.String(eni.TagCluster), Value: aws.String(cluster)},
	}
	out, err := r.api.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(r.inst.SubnetID),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: tags}}})
	if err != nil {
		t.Fatalf("creating ENI for %s: %v", owner, err)
	}
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}

func TestSweepDeletesOnlyOrphansOfGoneInstances(t *testing.T) {
	r := newRig(t, "m5.large")
	now := r.clk.Now()
	old := now.Add(-time.Hour)
	other := func() string {
		inst, err := r.sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: r.inst.SubnetID})
		if err != nil {
			t.Fatal(err)
		}
		return inst.ID
	}
	terminated, running := other(), other()
	if err := r.sim.TerminateInstance(terminated); err != nil {
		t.Fatal(err)
	}
	var (
		ofTerminated   = r.createTagged(t, terminated, "test", now) // young, but its owner is certainly gone
		ofRunning      = r.createTagged(t, running, "test", old)    // old, but its owner may still attach it
		ofUnknownOld   = r.createTagged(t, "i-0000000000000dead", "test", old)
		ofUnknownYoung = r.createTagged(t, "i-0000000000000new1", "test", now) // the owner may not be visible yet
		ofSelf         = r.createTagged(t, r.inst.ID, "test", old)             // the reconciler's business
		ofOtherCluster = r.createTagged(t, terminated, "elsewhere", old)
	)
	got, err := r.m.SweepOrphans(context.Background())
	if err != nil {
		t.Fatalf("sweeping: %v", err)
	}
	slices.Sort(got)
	want := []string{ofTerminated, ofUnknownOld}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sweep collected %v, want %v", got, want)
	}
	for _, tt := range []struct {
		name   string
		id     string
		exists bool
	}{
		{"the ENI of a terminated owner is deleted", ofTerminated, false},
		{"an old ENI of an owner EC2 does not list is deleted", ofUnknownOld, false},
		{"the ENI of a running owner is kept however old", ofRunning, true},
		{"a young ENI of an owner EC2 does not list is kept", ofUnknownYoung, true},
		{"the sweeper's own ENI is left to its reconciler", ofSelf, true},
		{"an ENI of another cluster is not touched", ofOtherCluster, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := r.sim.ENI(tt.id); ok != tt.exists {
				t.Errorf("ENI %s exists = %v, want %v", tt.id, ok, tt.exists)
			}
		})
	}
	again, err := r.m.SweepOrphans(context.Background())
	if err != nil || len(again) != 0 {
		t.Errorf("second sweep collected %v (error %v), want nothing", again, err)
	}
}
