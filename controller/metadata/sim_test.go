package metadata_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

func TestLoadAgainstTheSimulator(t *testing.T) {
	w := simworld.New(t, simworld.Options{Subnet: ec2sim.SubnetSpec{CIDR: "10.0.1.0/24"}})
	sim, inst := w.Sim, w.Instance
	imdsURL, err := w.Server.OpenIMDS(inst.ID)
	if err != nil {
		t.Fatalf("opening IMDS: %v", err)
	}
	dir := t.TempDir()
	t.Setenv("AWS_ENDPOINT_URL_EC2", w.Server.EC2URL())
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imdsURL)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))

	ctx := context.Background()
	// The region comes from the simulator's IMDS, the endpoints from the environment.
	sdk, md, err := ec2client.NewSDK(ctx, ec2client.SDKOptions{})
	if err != nil {
		t.Fatalf("building the SDK clients: %v", err)
	}
	api, err := ec2client.New(sdk, ec2client.Config{}, nil, nil)
	if err != nil {
		t.Fatalf("wrapping: %v", err)
	}
	stateDir := filepath.Join(dir, "state")
	n, err := metadata.Load(ctx, md, api, stateDir)
	if err != nil {
		t.Fatalf("loading: %v", err)
	}

	want := metadata.Node{
		InstanceID: inst.ID, InstanceType: "m5.large", AZ: inst.AZ, Region: sdk.Options().Region,
		PrimaryMAC: inst.PrimaryMAC, PrimaryIP: netip.MustParseAddr(inst.PrimaryIP), VPCID: "vpc-1",
		VPCCIDRs: []netip.Prefix{netip.MustParsePrefix(inst.VPCCIDR)}, SubnetID: "subnet-1",
		SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24"), SecurityGroups: inst.SecurityGroups,
	}
	got := *n
	got.Limits = metadata.Limits{}
	if !equalNode(got, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", got, want)
	}
	it, ok := ec2sim.LookupInstanceType("m5.large")
	if !ok {
		t.Fatal("the simulator does not know m5.large")
	}
	t.Logf("m5.large in the simulator: %+v; loaded limits %+v", it, n.Limits)
	// Ask EC2 itself for the type, to compare with what Load derived.
	out, err := sdk.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.large"}})
	if err != nil || len(out.InstanceTypes) != 1 {
		t.Fatalf("describing m5.large: %v", err)
	}
	ni := out.InstanceTypes[0].NetworkInfo
	if n.Limits.MaxENIs != int(aws.ToInt32(ni.MaximumNetworkInterfaces)) || n.Limits.IPv4PerENI != int(aws.ToInt32(ni.Ipv4AddressesPerInterface)) {
		t.Errorf("limits %+v do not match EC2's %d ENIs, %d IPv4 per ENI", n.Limits, aws.ToInt32(ni.MaximumNetworkInterfaces), aws.ToInt32(ni.Ipv4AddressesPerInterface))
	}

	before := sim.Counters()["DescribeInstanceTypes"].Calls
	if _, err := metadata.Load(ctx, md, api, stateDir); err != nil {
		t.Fatalf("loading again: %v", err)
	}
	if after := sim.Counters()["DescribeInstanceTypes"].Calls; after != before {
		t.Errorf("the second load made %d DescribeInstanceTypes calls, want 0 (cached)", after-before)
	}

	enis, err := metadata.ENIs(ctx, md)
	if err != nil {
		t.Fatalf("listing ENIs: %v", err)
	}
	if len(enis) != 1 || enis[0].ID != inst.PrimaryENI || enis[0].MAC != inst.PrimaryMAC || enis[0].DeviceIndex != 0 ||
		!slices.Contains(enis[0].IPs, netip.MustParseAddr(inst.PrimaryIP)) {
		t.Errorf("IMDS ENIs = %+v, want the primary ENI %s", enis, inst.PrimaryENI)
	}
}

func equalNode(a, b metadata.Node) bool {
	return a.InstanceID == b.InstanceID && a.InstanceType == b.InstanceType && a.AZ == b.AZ && a.Region == b.Region &&
		a.PrimaryMAC == b.PrimaryMAC && a.PrimaryIP == b.PrimaryIP && a.VPCID == b.VPCID && slices.Equal(a.VPCCIDRs, b.VPCCIDRs) &&
		a.SubnetID == b.SubnetID && a.SubnetCIDR == b.SubnetCIDR && slices.Equal(a.SecurityGroups, b.SecurityGroups)
}
