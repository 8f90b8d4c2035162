package ec2sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func newDualStackWorld(t *testing.T, mod func(*Config)) *world {
	t.Helper()
	return newSeededWorld(t, mod, DualStackSeed)
}

func ipv6PrefixesOf(ni types.NetworkInterface) []string {
	var out []string
	for _, p := range ni.Ipv6Prefixes {
		out = append(out, aws.ToString(p.Ipv6Prefix))
	}
	return out
}

func ipv6sOf(ni types.NetworkInterface) []string {
	var out []string
	for _, a := range ni.Ipv6Addresses {
		out = append(out, aws.ToString(a.Ipv6Address))
	}
	return out
}

// assignIPv6 calls AssignIpv6Addresses on eni and fails t on an error.
func (w *world) assignIPv6(t *testing.T, eni string, in ec2.AssignIpv6AddressesInput) *ec2.AssignIpv6AddressesOutput {
	t.Helper()
	in.NetworkInterfaceId = &eni
	out, err := w.ec2.AssignIpv6Addresses(ctxT(t), &in)
	if err != nil {
		t.Fatalf("assigning IPv6 to %s: %v", eni, err)
	}
	return out
}

func TestTheDualStackSeedDescribesItsIPv6BlocksAsEC2Does(t *testing.T) {
	w := newDualStackWorld(t, nil)
	ctx := ctxT(t)
	vpcs, err := w.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{DefaultVPC}})
	if err != nil || len(vpcs.Vpcs) != 1 {
		t.Fatalf("describing the VPC: %v", err)
	}
	set := vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet
	if len(set) != 1 || aws.ToString(set[0].Ipv6CidrBlock) != DualStackVPCIPv6 || set[0].Ipv6CidrBlockState == nil ||
		set[0].Ipv6CidrBlockState.State != types.VpcCidrBlockStateCodeAssociated || aws.ToString(set[0].AssociationId) == "" ||
		aws.ToString(set[0].NetworkBorderGroup) != "us-west-2" {
		t.Fatalf("VPC ipv6CidrBlockAssociationSet = %+v, want %s associated in us-west-2", set, DualStackVPCIPv6)
	}
	subnets, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{{
		Name: aws.String("ipv6-cidr-block-association.ipv6-cidr-block"), Values: []string{DualStackSubnetBIPv6}}}})
	if err != nil || len(subnets.Subnets) != 1 || aws.ToString(subnets.Subnets[0].SubnetId) != DefaultSubnetB {
		t.Fatalf("subnets with %s: %+v, %v; want %s alone", DualStackSubnetBIPv6, subnets, err, DefaultSubnetB)
	}
	sset := subnets.Subnets[0].Ipv6CidrBlockAssociationSet
	if len(sset) != 1 || aws.ToString(sset[0].Ipv6CidrBlock) != DualStackSubnetBIPv6 ||
		sset[0].Ipv6CidrBlockState.State != types.SubnetCidrBlockStateCodeAssociated {
		t.Fatalf("subnet ipv6CidrBlockAssociationSet = %+v", sset)
	}
	types6, err := w.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.large", "t3.micro"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types6.InstanceTypes {
		want := map[types.InstanceType]int32{"m5.large": 10, "t3.micro": 2}[it.InstanceType]
		if got := aws.ToInt32(it.NetworkInfo.Ipv6AddressesPerInterface); got != want || !aws.ToBool(it.NetworkInfo.Ipv6Supported) {
			t.Errorf("%s Ipv6AddressesPerInterface = %d, want %d", it.InstanceType, got, want)
		}
	}
}

func TestAnIPv6PrefixCountGivesEachENIItsOwnSlash80OfTheSubnet(t *testing.T) {
	w := newDualStackWorld(t, nil)
	ctx := ctxT(t)
	subnet := netip.MustParsePrefix(DualStackSubnetAIPv6)
	out := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)})
	if len(out.AssignedIpv6Prefixes) != 1 || aws.ToString(out.NetworkInterfaceId) != w.inst.PrimaryENI {
		t.Fatalf("assigned %v on %s, want one prefix on %s", out.AssignedIpv6Prefixes, aws.ToString(out.NetworkInterfaceId), w.inst.PrimaryENI)
	}
	first := netip.MustParsePrefix(out.AssignedIpv6Prefixes[0])
	if first.Bits() != 80 || first.Masked() != first || !subnet.Contains(first.Addr()) {
		t.Fatalf("prefix %s is not an aligned /80 of %s", first, subnet)
	}
	if got := ipv6PrefixesOf(describeENI(t, w, w.inst.PrimaryENI)); len(got) != 1 || got[0] != first.String() {
		t.Fatalf("described ipv6PrefixSet = %v, want [%s]", got, first)
	}
	insts, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.inst.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if nis := insts.Reservations[0].Instances[0].NetworkInterfaces; len(nis) != 1 || len(nis[0].Ipv6Prefixes) != 1 ||
		aws.ToString(nis[0].Ipv6Prefixes[0].Ipv6Prefix) != first.String() {
		t.Fatalf("DescribeInstances shows the primary ENI as %+v, want its prefix %s", nis, first)
	}

	// Another ENI of the subnet gets another /80; addresses by count fall outside both prefixes.
	other := w.createENI(t, nil)
	second := netip.MustParsePrefix(w.assignIPv6(t, *other.NetworkInterfaceId, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}).AssignedIpv6Prefixes[0])
	if second.Overlaps(first) || !subnet.Contains(second.Addr()) {
		t.Fatalf("second ENI's prefix %s overlaps %s or leaves %s", second, first, subnet)
	}
	addrs := w.assignIPv6(t, *other.NetworkInterfaceId, ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(3)}).AssignedIpv6Addresses
	if len(addrs) != 3 {
		t.Fatalf("assigned addresses %v, want 3", addrs)
	}
	for _, s := range addrs {
		a := netip.MustParseAddr(s)
		if !subnet.Contains(a) || first.Contains(a) || second.Contains(a) {
			t.Errorf("address %s lies outside %s or inside a prefix", a, subnet)
		}
	}
	found, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{
		Name: aws.String("ipv6-addresses.ipv6-address"), Values: addrs[1:2]}}})
	if err != nil || len(found.NetworkInterfaces) != 1 || aws.ToString(found.NetworkInterfaces[0].NetworkInterfaceId) != *other.NetworkInterfaceId {
		t.Fatalf("filtering by %s: %v %v, want %s", addrs[1], found, err, *other.NetworkInterfaceId)
	}
	if got := ipv6sOf(found.NetworkInterfaces[0]); !slices.Equal(got, addrs) {
		t.Errorf("described ipv6AddressesSet = %v, want %v", got, addrs)
	}

	// Unassigning gives them back: the /80 is free for the primary ENI to name.
	un, err := w.ec2.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: other.NetworkInterfaceId,
		Ipv6Prefixes: []string{second.String()}, Ipv6Addresses: addrs[:1]})
	if err != nil {
		t.Fatalf("unassigning: %v", err)
	}
	if !slices.Equal(un.UnassignedIpv6Prefixes, []string{second.String()}) || !slices.Equal(un.UnassignedIpv6Addresses, addrs[:1]) {
		t.Errorf("unassigned %v and %v, want %s and %s", un.UnassignedIpv6Prefixes, un.UnassignedIpv6Addresses, second, addrs[0])
	}
	left := describeENI(t, w, *other.NetworkInterfaceId)
	if len(ipv6PrefixesOf(left)) != 0 || !slices.Equal(ipv6sOf(left), addrs[1:]) {
		t.Errorf("after unassigning, the ENI holds %v and %v", ipv6PrefixesOf(left), ipv6sOf(left))
	}
	named := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6Prefixes: []string{second.String()}})
	if !slices.Equal(named.AssignedIpv6Prefixes, []string{second.String()}) {
		t.Errorf("naming the freed prefix assigned %v", named.AssignedIpv6Prefixes)
	}
	if st, _ := w.sim.ENI(w.inst.PrimaryENI); !slices.Equal(st.IPv6Prefixes, []string{first.String(), second.String()}) {
		t.Errorf("state of the primary ENI: IPv6 prefixes %v", st.IPv6Prefixes)
	}
}

func TestCreateNetworkInterfaceTakesIPv6CountsAndDeleteGivesThemBack(t *testing.T) {
	w := newDualStackWorld(t, nil)
	ctx := ctxT(t)
	ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetB), Ipv6PrefixCount: aws.Int32(1)})
	if len(ni.Ipv6Prefixes) != 1 {
		t.Fatalf("created with IPv6 prefixes %v, want one", ipv6PrefixesOf(ni))
	}
	p := ipv6PrefixesOf(ni)[0]
	if !netip.MustParsePrefix(DualStackSubnetBIPv6).Contains(netip.MustParsePrefix(p).Addr()) {
		t.Errorf("prefix %s is not in subnet B's %s", p, DualStackSubnetBIPv6)
	}
	withAddrs := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetB), Ipv6AddressCount: aws.Int32(2)})
	if len(ipv6sOf(withAddrs)) != 2 {
		t.Errorf("created with IPv6 addresses %v, want two", ipv6sOf(withAddrs))
	}
	if _, err := w.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId}); err != nil {
		t.Fatal(err)
	}
	again := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetB),
		Ipv6Prefixes: []types.Ipv6PrefixSpecificationRequest{{Ipv6Prefix: &p}}})
	if got := ipv6PrefixesOf(again); !slices.Equal(got, []string{p}) {
		t.Errorf("the deleted ENI's prefix %s could not be named again: got %v", p, got)
	}
	_, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetB), Ipv6PrefixCount: aws.Int32(1),
		Ipv6Prefixes: []types.Ipv6PrefixSpecificationRequest{{Ipv6Prefix: aws.String("2600:1f14:e1a:e102:5::/80")}}})
	wantAPIError(t, err, CodeInvalidParameterCombination, "", http.StatusBadRequest)
}

func TestIPv6CallsAnswerEC2sErrorCodes(t *testing.T) {
	w := newDualStackWorld(t, nil)
	ctx := ctxT(t)
	if err := w.sim.AddSubnet(SubnetSpec{ID: DefaultSubnetC, VPCID: DefaultVPC, CIDR: "10.0.64.0/19", AZ: "us-west-2c"}); err != nil {
		t.Fatal(err)
	}
	v4only := *w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetC)}).NetworkInterfaceId
	xen, err := w.sim.AddInstance(InstanceSpec{Type: "m4.large", SubnetID: DefaultSubnetA})
	if err != nil {
		t.Fatal(err)
	}
	full := *w.createENI(t, nil).NetworkInterfaceId
	if _, err := w.attach(t, full, w.inst.ID, 1); err != nil {
		t.Fatal(err)
	}
	w.assignIPv6(t, full, ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(10)})
	held := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}).AssignedIpv6Prefixes[0]
	insideHeld := netip.MustParsePrefix(held).Addr().Next().String()
	eni := w.inst.PrimaryENI
	cases := []struct {
		name, code, msg string
		in              ec2.AssignIpv6AddressesInput
	}{
		{"an unknown ENI", CodeInvalidENIIDNotFound, "The networkInterface ID 'eni-0123456789abcdef0' does not exist",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String("eni-0123456789abcdef0"), Ipv6PrefixCount: aws.Int32(1)}},
		{"a subnet without an IPv6 block", CodeInvalidParameterValue, "The subnet " + DefaultSubnetC + " of network interface " + v4only + " has no IPv6 CIDR block.",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &v4only, Ipv6PrefixCount: aws.Int32(1)}},
		{"neither addresses nor prefixes", CodeMissingParameter, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni}},
		{"a count and a list of addresses", CodeInvalidParameterCombination, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6AddressCount: aws.Int32(1), Ipv6Addresses: []string{"2600:1f14:e1a:e101::10"}}},
		{"a count and a list of prefixes", CodeInvalidParameterCombination, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6PrefixCount: aws.Int32(1), Ipv6Prefixes: []string{"2600:1f14:e1a:e101:7::/80"}}},
		{"a prefix of another subnet", CodeInvalidParameterValue, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6Prefixes: []string{"2600:1f14:e1a:e102:7::/80"}}},
		{"a prefix that is not a /80", CodeInvalidParameterValue, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6Prefixes: []string{"2600:1f14:e1a:e101:7::/96"}}},
		{"another ENI's prefix", CodeInvalidParameterValue, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &full, Ipv6Prefixes: []string{held}}},
		{"an address of another subnet", CodeInvalidParameterValue, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6Addresses: []string{"2600:1f14:e1a:e102::10"}}},
		{"an address inside a prefix the same call names", CodeInvalidParameterValue, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6Prefixes: []string{"2600:1f14:e1a:e101:7::/80"},
				Ipv6Addresses: []string{"2600:1f14:e1a:e101:7::10"}}},
		{"an address inside another ENI's prefix", CodeInvalidIPAddressInUse, "",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &full, Ipv6Addresses: []string{insideHeld}}},
		{"more addresses than the type allows per ENI", CodePrivateIPAddressLimit, "Number of IPv6 addresses will exceed limit.",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &full, Ipv6AddressCount: aws.Int32(1)}},
		{"a prefix on a Xen instance type", CodeInvalidParameterValue, "Prefix delegation is not supported for instance type m4.large.",
			ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &xen.PrimaryENI, Ipv6PrefixCount: aws.Int32(1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.ec2.AssignIpv6Addresses(ctx, &tc.in)
			wantAPIError(t, err, tc.code, tc.msg, http.StatusBadRequest)
		})
	}
	t.Run("addresses on a Xen instance type are fine", func(t *testing.T) {
		w.assignIPv6(t, xen.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(1)})
	})
	unassign := []struct {
		name string
		in   ec2.UnassignIpv6AddressesInput
	}{
		{"an address the ENI does not hold", ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6Addresses: []string{"2600:1f14:e1a:e101::10"}}},
		{"a prefix the ENI does not hold", ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &full, Ipv6Prefixes: []string{held}}},
	}
	for _, tc := range unassign {
		t.Run("unassigning "+tc.name, func(t *testing.T) {
			_, err := w.ec2.UnassignIpv6Addresses(ctx, &tc.in)
			wantAPIError(t, err, CodeInvalidParameterValue, "", http.StatusBadRequest)
		})
	}
	if st, _ := w.sim.ENI(full); len(st.IPv6s) != 10 || len(st.IPv6Prefixes) != 0 {
		t.Errorf("refused calls changed ENI %s: %d addresses, prefixes %v", full, len(st.IPv6s), st.IPv6Prefixes)
	}
}

// An ENI holds as many IPv6 addresses and prefixes as DescribeInstanceTypes' Ipv6AddressesPerInterface says
// for its instance's type; a prefix takes one of those slots, as a /28 takes one IPv4 slot.
func TestIPv6PrefixesAndAddressesShareTheTypesIPv6Limit(t *testing.T) {
	w := newDualStackWorld(t, nil)
	ctx := ctxT(t)
	for _, typ := range []string{"m5.large", "t3.micro"} {
		t.Run(typ, func(t *testing.T) {
			inst, err := w.sim.AddInstance(InstanceSpec{Type: typ, SubnetID: DefaultSubnetB})
			if err != nil {
				t.Fatal(err)
			}
			out, err := w.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(typ)}})
			if err != nil {
				t.Fatal(err)
			}
			limit := aws.ToInt32(out.InstanceTypes[0].NetworkInfo.Ipv6AddressesPerInterface)
			eni := inst.PrimaryENI
			w.assignIPv6(t, eni, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)})
			w.assignIPv6(t, eni, ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(limit - 1)})
			_, err = w.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6PrefixCount: aws.Int32(1)})
			wantAPIError(t, err, CodePrivateIPAddressLimit, "Number of IPv6 addresses will exceed limit.", http.StatusBadRequest)
			if st, _ := w.sim.ENI(eni); int32(len(st.IPv6s)+len(st.IPv6Prefixes)) != limit {
				t.Errorf("the ENI holds %d addresses and %d prefixes, want %d in all", len(st.IPv6s), len(st.IPv6Prefixes), limit)
			}
		})
	}
}

func TestAssociatingIPv6BlocksWithAVPCAndASubnet(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	vout, err := w.ec2.AssociateVpcCidrBlock(ctx, &ec2.AssociateVpcCidrBlockInput{VpcId: aws.String(DefaultVPC), AmazonProvidedIpv6CidrBlock: aws.Bool(true)})
	if err != nil {
		t.Fatalf("associating an Amazon-provided block: %v", err)
	}
	block := netip.MustParsePrefix(aws.ToString(vout.Ipv6CidrBlockAssociation.Ipv6CidrBlock))
	if block.Bits() != 56 || aws.ToString(vout.VpcId) != DefaultVPC {
		t.Fatalf("associated %s with %s, want a /56 with %s", block, aws.ToString(vout.VpcId), DefaultVPC)
	}
	b := block.Addr().As16()
	b[7] = 0x2a
	slash64 := netip.PrefixFrom(netip.AddrFrom16(b), 64).String()
	sout, err := w.ec2.AssociateSubnetCidrBlock(ctx, &ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String(DefaultSubnetA), Ipv6CidrBlock: &slash64})
	if err != nil {
		t.Fatalf("associating %s: %v", slash64, err)
	}
	if got := aws.ToString(sout.Ipv6CidrBlockAssociation.Ipv6CidrBlock); got != slash64 || aws.ToString(sout.SubnetId) != DefaultSubnetA {
		t.Fatalf("associated %s with %s", got, aws.ToString(sout.SubnetId))
	}
	p := netip.MustParsePrefix(w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}).AssignedIpv6Prefixes[0])
	if !netip.MustParsePrefix(slash64).Contains(p.Addr()) {
		t.Errorf("prefix %s is not in the new block %s", p, slash64)
	}
	refusals := []struct {
		name, code string
		in         ec2.AssociateSubnetCidrBlockInput
	}{
		{"a second block for the subnet", "InvalidParameterValue", ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String(DefaultSubnetA), Ipv6CidrBlock: &slash64}},
		{"the same block for another subnet", "InvalidSubnet.Conflict", ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String(DefaultSubnetB), Ipv6CidrBlock: &slash64}},
		{"a block outside the VPC's", "InvalidSubnet.Range", ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String(DefaultSubnetB), Ipv6CidrBlock: aws.String("2001:db8:0:1::/64")}},
		{"a block that is not a /64", "InvalidSubnet.Range", ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String(DefaultSubnetB), Ipv6CidrBlock: aws.String(block.String())}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.ec2.AssociateSubnetCidrBlock(ctx, &tc.in)
			wantAPIError(t, err, tc.code, "", http.StatusBadRequest)
		})
	}
}

func TestTheAdminAPIAndTheGoAPIAddIPv6Blocks(t *testing.T) {
	w := newWorld(t, nil)
	post := func(path string, body any, out any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(w.srv.AdminURL()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var assoc map[string]string
	if code := post("/vpcs/"+DefaultVPC+"/ipv6-cidr-blocks", map[string]string{}, &assoc); code != http.StatusOK || assoc["associationId"] == "" {
		t.Fatalf("adding an Amazon-provided block: %d %v", code, assoc)
	}
	block := netip.MustParsePrefix(w.sim.Snapshot().VPCs[0].IPv6CIDRBlocks[0])
	slash64 := netip.PrefixFrom(block.Addr(), 64).String()
	if code := post("/subnets", SubnetSpec{ID: "subnet-0c", VPCID: DefaultVPC, CIDR: "10.0.64.0/24", AZ: "us-west-2c", IPv6CIDR: slash64}, nil); code != http.StatusOK {
		t.Fatalf("adding a dual-stack subnet: %d", code)
	}
	if st := w.sim.Snapshot(); st.Subnets[0].ID != "subnet-0c" || st.Subnets[0].IPv6CIDR != slash64 {
		t.Fatalf("subnets (by id) = %+v, want subnet-0c first with %s", st.Subnets, slash64)
	}
	if err := w.sim.AddSubnet(SubnetSpec{ID: "subnet-0d", VPCID: DefaultVPC, CIDR: "10.0.65.0/24", IPv6CIDR: "2001:db8::/64"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a /64 outside the VPC's blocks: %v, want ErrInvalid", err)
	}
	if _, err := w.sim.AddSubnetIPv6Block(DefaultSubnetA, slash64); !errors.Is(err, ErrInvalid) {
		t.Errorf("a /64 another subnet holds: %v, want ErrInvalid", err)
	}
	if err := w.sim.AddVPC("vpc-0other", "10.1.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.sim.AddVPCIPv6Block("vpc-0other", block.String()); !errors.Is(err, ErrExists) {
		t.Errorf("a /56 another VPC holds: %v, want ErrExists", err)
	}
}

// The world outside EC2 (the vpcfabric) learns of IPv6 changes from the events, as of IPv4 ones.
func TestIPv6ChangesAreEvents(t *testing.T) {
	w := newDualStackWorld(t, nil)
	events, cancel := w.sim.Subscribe(16)
	defer cancel()
	p := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}).AssignedIpv6Prefixes[0]
	if ev, ok := nextEvent(t, events).(IPsAssigned); !ok || ev.InstanceID != w.inst.ID || !slices.Equal(ev.IPv6Prefixes, []string{p}) {
		t.Fatalf("after assigning %s: %+v", p, ev)
	}
	if _, err := w.ec2.UnassignIpv6Addresses(ctxT(t), &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &w.inst.PrimaryENI,
		Ipv6Prefixes: []string{p}}); err != nil {
		t.Fatal(err)
	}
	if ev, ok := nextEvent(t, events).(IPsUnassigned); !ok || !slices.Equal(ev.IPv6Prefixes, []string{p}) {
		t.Fatalf("after unassigning %s: %+v", p, ev)
	}
	// An ENI created with an IPv6 prefix reports it once attached, after ENIAttached.
	ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{Ipv6PrefixCount: aws.Int32(1)})
	if _, err := w.attach(t, *ni.NetworkInterfaceId, w.inst.ID, 1); err != nil {
		t.Fatal(err)
	}
	if ev, ok := nextEvent(t, events).(ENIAttached); !ok || ev.ENIID != *ni.NetworkInterfaceId {
		t.Fatalf("after attaching: %+v", ev)
	}
	if ev, ok := nextEvent(t, events).(IPsAssigned); !ok || !slices.Equal(ev.IPv6Prefixes, ipv6PrefixesOf(ni)) {
		t.Fatalf("after attaching an ENI with %v: %+v", ipv6PrefixesOf(ni), ev)
	}
}
