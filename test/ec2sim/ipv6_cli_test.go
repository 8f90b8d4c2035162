package ec2sim

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/internal/testenv"
)

// The AWS CLI (botocore, an EC2 client independent of the Go SDK) drives the IPv6 calls.
func TestTheAWSCLIAssignsAndListsIPv6Prefixes(t *testing.T) {
	testenv.RequireTool(t, "aws")
	w := newDualStackWorld(t, nil)
	aws := w.awsCLI(t)
	eni := w.inst.PrimaryENI
	assigned := aws("assign-ipv6-addresses", "--network-interface-id", eni, "--ipv6-prefix-count", "1",
		"--query", "AssignedIpv6Prefixes[0]")
	p, err := netip.ParsePrefix(assigned)
	if err != nil || p.Bits() != 80 || !netip.MustParsePrefix(DualStackSubnetAIPv6).Contains(p.Addr()) {
		t.Fatalf("assigned %q, want a /80 of %s", assigned, DualStackSubnetAIPv6)
	}
	if got := aws("describe-network-interfaces", "--network-interface-ids", eni,
		"--query", "NetworkInterfaces[0].Ipv6Prefixes[].Ipv6Prefix"); got != assigned {
		t.Errorf("described IPv6 prefixes %q, want %q", got, assigned)
	}
	addrs := strings.Fields(aws("assign-ipv6-addresses", "--network-interface-id", eni, "--ipv6-address-count", "2",
		"--query", "AssignedIpv6Addresses"))
	if len(addrs) != 2 {
		t.Fatalf("assigned addresses %v, want 2", addrs)
	}
	if got := aws("describe-network-interfaces", "--filters", "Name=ipv6-addresses.ipv6-address,Values="+addrs[0],
		"--query", "NetworkInterfaces[].NetworkInterfaceId"); got != eni {
		t.Errorf("filtering by %s found %q, want %s", addrs[0], got, eni)
	}
	if got := aws("describe-subnets", "--subnet-ids", DefaultSubnetA, "--query", "Subnets[0].Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlock"); got != DualStackSubnetAIPv6 {
		t.Errorf("the subnet's IPv6 block %q, want %s", got, DualStackSubnetAIPv6)
	}
	if got := aws("describe-vpcs", "--vpc-ids", DefaultVPC, "--query", "Vpcs[0].Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlock"); got != DualStackVPCIPv6 {
		t.Errorf("the VPC's IPv6 block %q, want %s", got, DualStackVPCIPv6)
	}
	if got := aws("unassign-ipv6-addresses", "--network-interface-id", eni, "--ipv6-prefixes", assigned,
		"--query", "UnassignedIpv6Prefixes[0]"); got != assigned {
		t.Errorf("unassigned %q, want %q", got, assigned)
	}
}

func TestTheAWSCLISeesTheIPv6ErrorCodes(t *testing.T) {
	testenv.RequireTool(t, "aws")
	w := newDualStackWorld(t, nil)
	if err := w.sim.AddSubnet(SubnetSpec{ID: DefaultSubnetC, VPCID: DefaultVPC, CIDR: "10.0.64.0/19", AZ: "us-west-2c"}); err != nil {
		t.Fatal(err)
	}
	v4only := w.awsCLI(t)("create-network-interface", "--subnet-id", DefaultSubnetC, "--query", "NetworkInterface.NetworkInterfaceId")
	xen, err := w.sim.AddInstance(InstanceSpec{Type: "m4.large", SubnetID: DefaultSubnetA})
	if err != nil {
		t.Fatal(err)
	}
	run := w.awsCLIResult(t)
	cases := []struct {
		name, code string
		args       []string
	}{
		{"a subnet without an IPv6 block", CodeInvalidParameterValue, []string{"--network-interface-id", v4only, "--ipv6-prefix-count", "1"}},
		{"a Xen instance type", CodeInvalidParameterValue, []string{"--network-interface-id", xen.PrimaryENI, "--ipv6-prefix-count", "1"}},
		{"an unknown ENI", CodeInvalidENIIDNotFound, []string{"--network-interface-id", "eni-0123456789abcdef0", "--ipv6-prefix-count", "1"}},
		{"a foreign prefix", CodeInvalidParameterValue, []string{"--network-interface-id", w.inst.PrimaryENI, "--ipv6-prefixes", "2001:db8:0:0:1::/80"}},
		{"a foreign address", CodeInvalidParameterValue, []string{"--network-interface-id", w.inst.PrimaryENI, "--ipv6-addresses", "2001:db8::10"}},
		{"more than the type allows", CodePrivateIPAddressLimit, []string{"--network-interface-id", w.inst.PrimaryENI, "--ipv6-address-count", "11"}},
		{"a count and a list", CodeInvalidParameterCombination, []string{"--network-interface-id", w.inst.PrimaryENI, "--ipv6-address-count", "1", "--ipv6-addresses", "2600:1f14:e1a:e101::10"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(append([]string{"assign-ipv6-addresses"}, tc.args...)...)
			if err == nil || !strings.Contains(out, "("+tc.code+")") {
				t.Fatalf("aws ec2 assign-ipv6-addresses %v: %v: %s; want %s", tc.args, err, out, tc.code)
			}
		})
	}
}
