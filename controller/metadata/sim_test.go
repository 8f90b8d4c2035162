package metadata_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// simIMDS serves a simworld of o and points the SDK's variables at its EC2 and the instance's IMDS; it
// returns the world, the bare SDK client, the IMDS client, the wrapped EC2 client and a scratch directory.
func simIMDS(t *testing.T, o simworld.Options) (*simworld.World, *ec2.Client, *imds.Client, *ec2client.Client, string) {
	t.Helper()
	w := simworld.New(t, o)
	imdsURL, err := w.Server.OpenIMDS(w.Instance.ID)
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
	// The region comes from the simulator's IMDS, the endpoints from the environment.
	sdk, md, err := ec2client.NewSDK(context.Background(), ec2client.SDKOptions{})
	if err != nil {
		t.Fatalf("building the SDK clients: %v", err)
	}
	api, err := ec2client.New(sdk, ec2client.Config{}, nil, nil)
	if err != nil {
		t.Fatalf("wrapping: %v", err)
	}
	return w, sdk, md, api, dir
}

func TestLoadAgainstTheSimulator(t *testing.T) {
	w, sdk, md, api, dir := simIMDS(t, simworld.Options{Subnet: ec2sim.SubnetSpec{CIDR: "10.0.1.0/24"}})
	sim, inst := w.Sim, w.Instance
	ctx := context.Background()
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

// On a dual-stack subnet Load reads the primary ENI's IPv6 facts from IMDS: the /80 assigned to it, the
// subnet's /64 and the VPC's /56; ENIs shows the same /80. On an IPv4-only subnet they are empty (above).
func TestLoadReadsThePrimaryENIsIPv6FactsFromTheSimulator(t *testing.T) {
	w, sdk, md, api, dir := simIMDS(t, simworld.Options{DualStack: true})
	ctx := context.Background()
	n, err := metadata.Load(ctx, md, api, dir)
	if err != nil {
		t.Fatalf("loading before the assign: %v", err)
	}
	if len(n.IPv6.Prefixes) != 0 || len(n.IPv6.Addrs) != 0 {
		t.Errorf("before any assign IMDS shows IPv6 %+v", n.IPv6)
	}
	out, err := sdk.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(w.Instance.PrimaryENI), Ipv6PrefixCount: aws.Int32(1)})
	if err != nil || len(out.AssignedIpv6Prefixes) != 1 {
		t.Fatalf("assigning a /80: %v", err)
	}
	n, err = metadata.Load(ctx, md, api, dir)
	if err != nil {
		t.Fatalf("loading: %v", err)
	}
	want := metadata.IPv6Facts{Prefixes: []netip.Prefix{netip.MustParsePrefix(out.AssignedIpv6Prefixes[0])},
		SubnetCIDRs: []netip.Prefix{netip.MustParsePrefix(ec2sim.DualStackSubnetAIPv6)},
		VPCCIDRs:    []netip.Prefix{netip.MustParsePrefix(ec2sim.DualStackVPCIPv6)}}
	if !slices.Equal(n.IPv6.Prefixes, want.Prefixes) || !slices.Equal(n.IPv6.SubnetCIDRs, want.SubnetCIDRs) ||
		!slices.Equal(n.IPv6.VPCCIDRs, want.VPCCIDRs) || len(n.IPv6.Addrs) != 0 {
		t.Errorf("IPv6 facts %+v, want %+v", n.IPv6, want)
	}
	enis, err := metadata.ENIs(ctx, md)
	if err != nil || len(enis) != 1 || !slices.Equal(enis[0].IPv6.Prefixes, want.Prefixes) {
		t.Errorf("IMDS ENIs %+v (%v), want the primary with the /80 %v", enis, err, want.Prefixes)
	}
}
