package ec2sim

import (
	"context"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fleet brings up n nodes in one big subnet; each node creates, attaches and fills one ENI through the
// SDK and reads it back from its own IMDS, all at once.
func fleet(tb testing.TB, n int) time.Duration {
	cfg := DefaultConfig()
	cfg.Throttling = false
	s := New(cfg)
	if err := s.AddVPC("vpc-0f1ee7", "10.128.0.0/12"); err != nil {
		tb.Fatal(err)
	}
	if err := s.AddSubnet(SubnetSpec{ID: "subnet-0f1ee7", VPCID: "vpc-0f1ee7", CIDR: "10.128.0.0/16", AZ: "us-west-2a"}); err != nil {
		tb.Fatal(err)
	}
	srv := StartTest(tb, s)
	insts := make([]Instance, n)
	for i := range insts {
		inst, err := s.AddInstance(InstanceSpec{Type: "m5.large", SubnetID: "subnet-0f1ee7"})
		if err != nil {
			tb.Fatal(err)
		}
		insts[i] = inst
	}
	events, cancel := s.Subscribe(64)
	defer cancel()
	var attached sync.WaitGroup
	attached.Add(n)
	go func() {
		for ev := range events {
			if _, ok := ev.(ENIAttached); ok {
				attached.Done()
			}
		}
	}()
	c := srv.EC2Client(tb)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, inst := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- node(tb, srv, c, inst)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	attached.Wait()
	if free := s.Snapshot().Subnets[0].Available; free != 65536-5-n*10 {
		tb.Fatalf("free addresses = %d, want %d", free, 65536-5-n*10)
	}
	return took
}

func node(tb testing.TB, srv *Server, c *ec2.Client, inst Instance) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(inst.SubnetID),
		SecondaryPrivateIpAddressCount: aws.Int32(5),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{{Key: aws.String("node"), Value: aws.String(inst.ID)}}}}})
	if err != nil {
		return fmt.Errorf("creating ENI for %s: %w", inst.ID, err)
	}
	id := out.NetworkInterface.NetworkInterfaceId
	att, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: id, InstanceId: &inst.ID, DeviceIndex: aws.Int32(1)})
	if err != nil {
		return fmt.Errorf("attaching for %s: %w", inst.ID, err)
	}
	if _, err := c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)}}); err != nil {
		return fmt.Errorf("modifying for %s: %w", inst.ID, err)
	}
	if _, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: id, SecondaryPrivateIpAddressCount: aws.Int32(3)}); err != nil {
		return fmt.Errorf("assigning for %s: %w", inst.ID, err)
	}
	d, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{inst.ID}}}})
	if err != nil || len(d.NetworkInterfaces) != 2 {
		return fmt.Errorf("describing for %s: %d ENIs, %v", inst.ID, len(d.NetworkInterfaces), err)
	}
	md, err := srv.IMDSClient(tb, inst.ID).GetMetadata(ctx, &imds.GetMetadataInput{Path: "network/interfaces/macs/" + *out.NetworkInterface.MacAddress + "/local-ipv4s"})
	if err != nil {
		return fmt.Errorf("IMDS of %s: %w", inst.ID, err)
	}
	b, err := io.ReadAll(md.Content)
	md.Content.Close()
	if v := string(b); err != nil || len(splitLines(v)) != 9 {
		return fmt.Errorf("IMDS of %s: %q, %v", inst.ID, v, err)
	}
	return nil
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func TestAFleetOfNodesSharesOneSimulator(t *testing.T) {
	took := fleet(t, 300)
	t.Logf("300 nodes: create+attach+modify+assign+describe+IMDS each, concurrently, in %v", took)
}

func TestIPChangesOfAnAttachedENIAreEvents(t *testing.T) {
	w := newWorld(t, nil)
	events, cancel := w.sim.Subscribe(8)
	defer cancel()
	as, err := w.ec2.AssignPrivateIpAddresses(ctxT(t), &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(w.inst.PrimaryENI),
		SecondaryPrivateIpAddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := nextEvent(t, events).(IPsAssigned)
	if !ok || ev.InstanceID != w.inst.ID || ev.ENIID != w.inst.PrimaryENI || len(ev.IPs) != 2 || ev.IPs[0] != *as.AssignedPrivateIpAddresses[0].PrivateIpAddress {
		t.Fatalf("event = %#v", ev)
	}
	if _, err := w.ec2.UnassignPrivateIpAddresses(ctxT(t), &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(w.inst.PrimaryENI),
		PrivateIpAddresses: ev.IPs[:1]}); err != nil {
		t.Fatal(err)
	}
	un, ok := nextEvent(t, events).(IPsUnassigned)
	if !ok || un.InstanceID != w.inst.ID || len(un.IPs) != 1 || un.IPs[0] != ev.IPs[0] {
		t.Fatalf("event = %#v", un)
	}
}

// BenchmarkFleet is the fleet simulation's load: go test -run '^$' -bench Fleet -benchtime 1x ./test/ec2sim
func BenchmarkFleet(b *testing.B) {
	for range b.N {
		took := fleet(b, 1000)
		b.ReportMetric(took.Seconds(), "s/1000nodes")
	}
}
