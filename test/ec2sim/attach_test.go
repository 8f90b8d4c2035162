package ec2sim

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/eniwire/eniwire/internal/clock"
)

func TestAttachmentLimitsFollowTheInstanceType(t *testing.T) {
	for _, tc := range []struct {
		typ string
		max int
	}{{"t3.medium", 3}, {"m5.large", 3}, {"m5.4xlarge", 8}, {"m4.4xlarge", 8}, {"c5.18xlarge", 15}} {
		t.Run(tc.typ+" takes "+fmt.Sprint(tc.max)+" ENIs", func(t *testing.T) {
			w := newWorld(t, nil)
			inst, err := w.sim.AddInstance(InstanceSpec{Type: tc.typ, SubnetID: DefaultSubnetA})
			if err != nil {
				t.Fatal(err)
			}
			for dev := 1; dev < tc.max; dev++ {
				if _, err := w.attach(t, *w.createENI(t, nil).NetworkInterfaceId, inst.ID, int32(dev)); err != nil {
					t.Fatalf("attach #%d: %v", dev, err)
				}
			}
			_, err = w.attach(t, *w.createENI(t, nil).NetworkInterfaceId, inst.ID, int32(tc.max))
			wantAPIError(t, err, CodeAttachmentLimitExceeded, fmt.Sprintf("Interface count %d exceeds the limit for %s", tc.max+1, tc.typ), 400)
		})
	}
	t.Run("network cards have their own limits", func(t *testing.T) {
		w := newWorld(t, nil)
		inst, err := w.sim.AddInstance(InstanceSpec{Type: "p4d.24xlarge", SubnetID: DefaultSubnetA})
		if err != nil {
			t.Fatal(err)
		}
		out, err := w.ec2.AttachNetworkInterface(ctxT(t), &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: w.createENI(t, nil).NetworkInterfaceId,
			InstanceId: &inst.ID, DeviceIndex: aws.Int32(0), NetworkCardIndex: aws.Int32(2)})
		if err != nil || aws.ToInt32(out.NetworkCardIndex) != 2 {
			t.Fatalf("attach on card 2 = %+v, %v", out, err)
		}
	})
}

func TestAttachmentsPassThroughAttachingAndDetachingOnTheScaledClock(t *testing.T) {
	// 20 s of attaching and detaching at 100x pass in 200 ms of wall time.
	w := newWorld(t, func(c *Config) {
		c.Clock = clock.NewScaled(100)
		c.AttachDelay, c.DetachDelay = 20*time.Second, 20*time.Second
	})
	events, cancel := w.sim.Subscribe(16)
	defer cancel()
	ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SecondaryPrivateIpAddressCount: aws.Int32(2)})
	start := time.Now()
	attID, err := w.attach(t, *ni.NetworkInterfaceId, w.inst.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	status := func() (types.NetworkInterfaceStatus, types.AttachmentStatus) {
		out, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*ni.NetworkInterfaceId}})
		if err != nil {
			t.Fatal(err)
		}
		n := out.NetworkInterfaces[0]
		if n.Attachment == nil {
			return n.Status, ""
		}
		return n.Status, n.Attachment.Status
	}
	if s, a := status(); s != types.NetworkInterfaceStatusInUse || a != types.AttachmentStatusAttaching {
		t.Fatalf("right after attach: %s/%s, want in-use/attaching", s, a)
	}
	ev := nextEvent(t, events)
	att, ok := ev.(ENIAttached)
	if !ok || att.ENIID != *ni.NetworkInterfaceId || att.MAC != *ni.MacAddress || att.DeviceIndex != 1 ||
		att.SubnetCIDR != "10.0.0.0/19" || att.PrimaryIP != *ni.PrivateIpAddress || len(att.IPs) != 3 {
		t.Fatalf("first event = %#v", ev)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("attached after %v of wall time, want about 200ms", el)
	}
	if ev, ok := nextEvent(t, events).(IPsAssigned); !ok || len(ev.IPs) != 2 {
		t.Fatalf("second event = %#v, want the 2 secondary IPs", ev)
	}
	if s, a := status(); s != types.NetworkInterfaceStatusInUse || a != types.AttachmentStatusAttached {
		t.Fatalf("after the delay: %s/%s", s, a)
	}
	if _, err := w.ec2.DetachNetworkInterface(ctxT(t), &ec2.DetachNetworkInterfaceInput{AttachmentId: &attID}); err != nil {
		t.Fatal(err)
	}
	if _, a := status(); a != types.AttachmentStatusDetaching {
		t.Fatalf("right after detach: %s", a)
	}
	if ev, ok := nextEvent(t, events).(ENIDetached); !ok || ev.ENIID != *ni.NetworkInterfaceId || ev.InstanceID != w.inst.ID {
		t.Fatalf("detach event = %#v", ev)
	}
	if s, a := status(); s != types.NetworkInterfaceStatusAvailable || a != "" {
		t.Fatalf("after detaching: %s/%s", s, a)
	}
}

func nextEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return nil
	}
}

func TestTerminatingAnInstanceDeletesOnlyENIsWithDeleteOnTermination(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	keep := *w.createENI(t, nil).NetworkInterfaceId
	gone := *w.createENI(t, nil).NetworkInterfaceId
	if _, err := w.attach(t, keep, w.inst.ID, 1); err != nil {
		t.Fatal(err)
	}
	attID, err := w.attach(t, gone, w.inst.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: &gone,
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: &attID, DeleteOnTermination: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	events, cancel := w.sim.Subscribe(16)
	defer cancel()
	// Through the admin API, as cmd/ec2sim's users would.
	req, _ := http.NewRequest(http.MethodDelete, w.srv.AdminURL()+"/instances/"+w.inst.ID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("terminate status = %d", resp.StatusCode)
	}
	for _, id := range []string{gone, w.inst.PrimaryENI} {
		_, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
		wantAPIError(t, err, CodeInvalidENIIDNotFound, "", 400)
	}
	out, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{keep}})
	if err != nil || out.NetworkInterfaces[0].Status != types.NetworkInterfaceStatusAvailable {
		t.Fatalf("kept ENI = %+v, %v", out, err)
	}
	var detached int
	for {
		ev := nextEvent(t, events)
		if _, ok := ev.(ENIDetached); ok {
			detached++
			continue
		}
		term, ok := ev.(InstanceTerminated)
		if !ok || term.InstanceID != w.inst.ID || len(term.DeletedENIs) != 2 || detached != 3 {
			t.Fatalf("event = %#v after %d detaches", ev, detached)
		}
		break
	}
	inst, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.inst.ID}})
	if err != nil || inst.Reservations[0].Instances[0].State.Name != types.InstanceStateNameTerminated {
		t.Fatalf("instance = %+v, %v", inst, err)
	}
}

func TestModifyTagsAndExplicitAddresses(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	for _, g := range []string{"sg-0000000000000000a", "sg-0000000000000000b"} {
		if _, err := w.sim.AddSecurityGroup(SecurityGroupSpec{ID: g, VPCID: DefaultVPC}); err != nil {
			t.Fatal(err)
		}
	}
	ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{
		PrivateIpAddresses: []types.PrivateIpAddressSpecification{
			{PrivateIpAddress: aws.String("10.0.1.10"), Primary: aws.Bool(true)},
			{PrivateIpAddress: aws.String("10.0.1.11")}}})
	id := ni.NetworkInterfaceId
	if *ni.PrivateIpAddress != "10.0.1.10" || len(ni.PrivateIpAddresses) != 2 {
		t.Fatalf("created = %+v", ni)
	}
	withPrefix := w.createENI(t, &ec2.CreateNetworkInterfaceInput{
		Ipv4Prefixes: []types.Ipv4PrefixSpecificationRequest{{Ipv4Prefix: aws.String("10.0.3.0/28")}}})
	if *withPrefix.Ipv4Prefixes[0].Ipv4Prefix != "10.0.3.0/28" {
		t.Fatalf("created with prefix = %+v", withPrefix)
	}
	steps := []struct {
		name string
		call func() error
	}{
		{"modify source/dest check", func() error {
			_, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
				SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)}})
			return err
		}},
		{"modify description", func() error {
			_, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
				Description: &types.AttributeValue{Value: aws.String("changed")}})
			return err
		}},
		{"modify groups", func() error {
			_, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
				Groups: []string{"sg-0000000000000000a", "sg-0000000000000000b"}})
			return err
		}},
		{"tag", func() error {
			_, err := w.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{*id},
				Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("b"), Value: aws.String("2")}}})
			return err
		}},
		{"untag one", func() error {
			_, err := w.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{*id}, Tags: []types.Tag{{Key: aws.String("a")}}})
			return err
		}},
		{"assign a prefix", func() error {
			_, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: id,
				Ipv4Prefixes: []string{"10.0.2.0/28"}})
			return err
		}},
		{"assign a specific IP and a prefix", func() error {
			_, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: id,
				PrivateIpAddresses: []string{"10.0.1.12"}, Ipv4Prefixes: []string{"10.0.2.16/28"}})
			return err
		}},
		{"unassign an IP and a prefix", func() error {
			_, err := w.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: id,
				PrivateIpAddresses: []string{"10.0.1.11"}, Ipv4Prefixes: []string{"10.0.2.0/28"}})
			return err
		}},
	}
	for _, st := range steps {
		if err := st.call(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	out, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*id}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.NetworkInterfaces[0]
	var ips []string
	for _, ip := range got.PrivateIpAddresses {
		ips = append(ips, *ip.PrivateIpAddress)
	}
	if aws.ToBool(got.SourceDestCheck) || *got.Description != "changed" || len(got.Groups) != 2 ||
		len(got.TagSet) != 1 || *got.TagSet[0].Key != "b" || fmt.Sprint(ips) != "[10.0.1.10 10.0.1.12]" ||
		len(got.Ipv4Prefixes) != 1 || *got.Ipv4Prefixes[0].Ipv4Prefix != "10.0.2.16/28" {
		t.Fatalf("described = %+v ips %v", got, ips)
	}
	_, err = w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(w.inst.PrimaryENI),
		PrivateIpAddresses: []string{"10.0.1.12"}})
	wantAPIError(t, err, CodePrivateIPAddressInUse, "The specified address 10.0.1.12 is already in use.", 400)
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(w.inst.PrimaryENI),
		PrivateIpAddresses: []string{"10.0.1.12"}, AllowReassignment: aws.Bool(true)}); err != nil {
		t.Fatalf("reassigning: %v", err)
	}
	if st, _ := w.sim.ENI(*id); fmt.Sprint(st.IPs) != "[10.0.1.10]" {
		t.Fatalf("after reassignment the ENI holds %v", st.IPs)
	}
}
