package ec2sim

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestENILifecycleThroughTheSDK(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	if _, err := w.sim.AddSecurityGroup(SecurityGroupSpec{ID: "sg-0123456789abcdef0", VPCID: DefaultVPC, Name: "nodes"}); err != nil {
		t.Fatal(err)
	}

	created, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:                       aws.String(DefaultSubnetA),
		Description:                    aws.String("aws-K8S-" + w.inst.ID),
		Groups:                         []string{"sg-0123456789abcdef0"},
		SecondaryPrivateIpAddressCount: aws.Int32(3),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{{Key: aws.String("owner"), Value: aws.String(w.inst.ID)}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ni := created.NetworkInterface
	if len(ni.PrivateIpAddresses) != 4 || !aws.ToBool(ni.PrivateIpAddresses[0].Primary) || ni.Status != types.NetworkInterfaceStatusAvailable {
		t.Fatalf("created ENI = %+v", ni)
	}
	if created.ClientToken == nil || *created.ClientToken == "" {
		t.Fatal("the SDK's auto-filled ClientToken was not echoed")
	}
	subnet := netip.MustParsePrefix("10.0.0.0/19")
	for _, ip := range ni.PrivateIpAddresses {
		if !subnet.Contains(netip.MustParseAddr(*ip.PrivateIpAddress)) {
			t.Fatalf("IP %s outside the subnet", *ip.PrivateIpAddress)
		}
	}

	att, err := w.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: aws.String(w.inst.ID),
		DeviceIndex: aws.Int32(1), NetworkCardIndex: aws.Int32(0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: ni.NetworkInterfaceId,
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)},
	}); err != nil {
		t.Fatal(err)
	}
	assigned, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: ni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(assigned.AssignedPrivateIpAddresses) != 2 {
		t.Fatalf("assigned %d IPs, want 2", len(assigned.AssignedPrivateIpAddresses))
	}

	desc, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{w.inst.ID}},
		{Name: aws.String("tag:owner"), Values: []string{w.inst.ID}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.NetworkInterfaces) != 1 {
		t.Fatalf("described %d ENIs, want 1", len(desc.NetworkInterfaces))
	}
	got := desc.NetworkInterfaces[0]
	if got.Status != types.NetworkInterfaceStatusInUse || got.Attachment.Status != types.AttachmentStatusAttached ||
		!aws.ToBool(got.Attachment.DeleteOnTermination) || aws.ToInt32(got.Attachment.DeviceIndex) != 1 ||
		len(got.PrivateIpAddresses) != 6 || aws.ToString(got.MacAddress) == "" {
		t.Fatalf("described ENI = %+v, attachment %+v", got, got.Attachment)
	}

	insts, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.inst.ID}})
	if err != nil {
		t.Fatal(err)
	}
	in := insts.Reservations[0].Instances[0]
	if len(in.NetworkInterfaces) != 2 || aws.ToString(in.PrivateIpAddress) != w.inst.PrimaryIP ||
		len(in.NetworkInterfaces[1].PrivateIpAddresses) != 6 || in.InstanceType != types.InstanceTypeM5Large {
		t.Fatalf("described instance = %+v", in)
	}

	if _, err := w.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{*assigned.AssignedPrivateIpAddresses[0].PrivateIpAddress}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId, Force: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	after, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*ni.NetworkInterfaceId}})
	if err != nil {
		t.Fatal(err)
	}
	if after.NetworkInterfaces[0].Status != types.NetworkInterfaceStatusAvailable || len(after.NetworkInterfaces[0].PrivateIpAddresses) != 5 {
		t.Fatalf("after detach = %+v", after.NetworkInterfaces[0])
	}
	if _, err := w.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId}); err != nil {
		t.Fatal(err)
	}
	_, err = w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*ni.NetworkInterfaceId}})
	wantAPIError(t, err, CodeInvalidENIIDNotFound, "The networkInterface ID '"+*ni.NetworkInterfaceId+"' does not exist", 400)
}

func TestSubnetsReportTrueFreeAddressCounts(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	count := func() int32 {
		out, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{DefaultSubnetA}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
	}
	// A /19 has 8192 addresses, AWS reserves 5, the instance's primary ENI holds 1.
	if got := count(); got != 8192-5-1 {
		t.Fatalf("available = %d, want %d", got, 8192-5-1)
	}
	out, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA),
		SecondaryPrivateIpAddressCount: aws.Int32(4), Ipv4PrefixCount: nil})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 8192-5-1-5 {
		t.Fatalf("available after a 5-address ENI = %d", got)
	}
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: out.NetworkInterface.NetworkInterfaceId, Ipv4PrefixCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 8192-5-1-5-16 {
		t.Fatalf("available after a /28 prefix = %d", got)
	}
	if _, err := w.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: out.NetworkInterface.NetworkInterfaceId}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 8192-5-1 {
		t.Fatalf("available after delete = %d", got)
	}
	all, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("vpc-id"), Values: []string{DefaultVPC}}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, sn := range all.Subnets {
		ids = append(ids, *sn.SubnetId)
	}
	if !slices.Equal(ids, []string{DefaultSubnetA, DefaultSubnetB}) {
		t.Fatalf("subnets = %v", ids)
	}
}
