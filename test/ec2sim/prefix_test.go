package ec2sim

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/internal/testenv"
)

func describeENI(t *testing.T, w *world, id string) types.NetworkInterface {
	t.Helper()
	out, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if err != nil || len(out.NetworkInterfaces) != 1 {
		t.Fatalf("describing %s: %v", id, err)
	}
	return out.NetworkInterfaces[0]
}

func prefixesOf(ni types.NetworkInterface) []string {
	var out []string
	for _, p := range ni.Ipv4Prefixes {
		out = append(out, aws.ToString(p.Ipv4Prefix))
	}
	return out
}

func available(t *testing.T, w *world, subnetID string) int {
	t.Helper()
	out, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	if err != nil || len(out.Subnets) != 1 {
		t.Fatalf("describing %s: %v", subnetID, err)
	}
	return int(aws.ToInt32(out.Subnets[0].AvailableIpAddressCount))
}

func TestPrefixesByCountTakeOneIPv4SlotEachAndShowInDescribeAndIMDS(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	eni := w.inst.PrimaryENI
	before := available(t, w, DefaultSubnetA)
	out, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eni, Ipv4PrefixCount: aws.Int32(2)})
	if err != nil {
		t.Fatalf("assigning 2 prefixes: %v", err)
	}
	if len(out.AssignedIpv4Prefixes) != 2 {
		t.Fatalf("assigned %d prefixes, want 2", len(out.AssignedIpv4Prefixes))
	}
	for _, p := range out.AssignedIpv4Prefixes {
		if pp := netip.MustParsePrefix(aws.ToString(p.Ipv4Prefix)); pp.Bits() != 28 || pp.Masked() != pp {
			t.Errorf("prefix %s is not an aligned /28", pp)
		}
	}
	if got := available(t, w, DefaultSubnetA); got != before-32 {
		t.Errorf("available addresses %d -> %d, want 32 fewer", before, got)
	}
	got := prefixesOf(describeENI(t, w, eni))
	if len(got) != 2 {
		t.Fatalf("ipv4PrefixSet = %v, want 2 prefixes", got)
	}
	c := w.srv.IMDSClient(t, w.inst.ID)
	if v := mustIMDS(t, c, "network/interfaces/macs/"+w.inst.PrimaryMAC+"/ipv4-prefix"); v != strings.Join(got, "\n") {
		t.Errorf("IMDS ipv4-prefix = %q, want %q", v, strings.Join(got, "\n"))
	}

	// An m5.large ENI has 10 IPv4 slots: the primary, 2 prefixes and 7 secondary IPs fill them.
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eni,
		SecondaryPrivateIpAddressCount: aws.Int32(7)}); err != nil {
		t.Fatalf("filling the slots with IPs: %v", err)
	}
	_, err = w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eni, Ipv4PrefixCount: aws.Int32(1)})
	wantAPIError(t, err, CodePrivateIPAddressLimit, "Number of private addresses will exceed limit.", http.StatusBadRequest)

	if _, err := w.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: &eni,
		Ipv4Prefixes: got[:1]}); err != nil {
		t.Fatalf("unassigning a prefix: %v", err)
	}
	if left := prefixesOf(describeENI(t, w, eni)); len(left) != 1 || left[0] != got[1] {
		t.Errorf("after unassigning %s the ENI holds %v, want [%s]", got[0], left, got[1])
	}
	// The freed slot takes a prefix again.
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eni, Ipv4PrefixCount: aws.Int32(1)}); err != nil {
		t.Fatalf("a prefix into the freed slot: %v", err)
	}
}

func TestCreateNetworkInterfaceWithAPrefixCount(t *testing.T) {
	w := newWorld(t, nil)
	out, err := w.ec2.CreateNetworkInterface(ctxT(t), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetB), Ipv4PrefixCount: aws.Int32(3)})
	if err != nil {
		t.Fatalf("creating: %v", err)
	}
	ni := out.NetworkInterface
	if len(ni.Ipv4Prefixes) != 3 || len(ni.PrivateIpAddresses) != 1 {
		t.Fatalf("created with %d prefixes and %d IPs, want 3 and the primary", len(ni.Ipv4Prefixes), len(ni.PrivateIpAddresses))
	}
	if got := prefixesOf(describeENI(t, w, aws.ToString(ni.NetworkInterfaceId))); len(got) != 3 {
		t.Errorf("described prefixes %v", got)
	}
}

func TestXenInstanceTypesRefusePrefixes(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	inst, err := w.sim.AddInstance(InstanceSpec{Type: "m4.large", SubnetID: DefaultSubnetA})
	if err != nil {
		t.Fatal(err)
	}
	types, err := w.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m4.large", "m5.large"}})
	if err != nil || len(types.InstanceTypes) != 2 {
		t.Fatalf("describing the types: %v", err)
	}
	for _, it := range types.InstanceTypes {
		want := map[string]string{"m4.large": "xen", "m5.large": "nitro"}[string(it.InstanceType)]
		if string(it.Hypervisor) != want {
			t.Errorf("%s hypervisor = %q, want %q", it.InstanceType, it.Hypervisor, want)
		}
	}
	_, err = w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &inst.PrimaryENI, Ipv4PrefixCount: aws.Int32(1)})
	wantAPIError(t, err, CodeInvalidParameterValue, "Prefix delegation is not supported for instance type m4.large.", http.StatusBadRequest)
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &inst.PrimaryENI,
		SecondaryPrivateIpAddressCount: aws.Int32(2)}); err != nil {
		t.Fatalf("secondary IPs on a Xen type: %v", err)
	}
	// An ENI created with a prefix may exist, but not be attached to a Xen instance.
	out, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA), Ipv4PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatalf("creating an ENI with a prefix: %v", err)
	}
	_, err = w.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: out.NetworkInterface.NetworkInterfaceId,
		InstanceId: &inst.ID, DeviceIndex: aws.Int32(1)})
	wantAPIError(t, err, CodeInvalidParameterValue, "", http.StatusBadRequest)
}

// fragment creates ENIs in subnetID holding n secondary IPs in all, returning every address they took.
func fragment(t *testing.T, w *world, subnetID string, n int) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for n > 0 {
		k := min(n, 39)
		n -= k
		res, err := w.ec2.CreateNetworkInterface(ctxT(t), &ec2.CreateNetworkInterfaceInput{SubnetId: &subnetID,
			SecondaryPrivateIpAddressCount: aws.Int32(int32(k))})
		if err != nil {
			t.Fatalf("creating an ENI with %d IPs: %v", k, err)
		}
		for _, ip := range res.NetworkInterface.PrivateIpAddresses {
			out = append(out, netip.MustParseAddr(aws.ToString(ip.PrivateIpAddress)))
		}
	}
	return out
}

// smallSubnet adds a /24 (16 /28s, 251 usable addresses) to the default VPC.
func smallSubnet(t *testing.T, w *world, scatter bool) string {
	t.Helper()
	const id = "subnet-0e1a1e000000000f1"
	if err := w.sim.AddSubnet(SubnetSpec{ID: id, VPCID: DefaultVPC, CIDR: "10.0.64.0/24", AZ: "us-west-2a", Scatter: scatter}); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestScatteredIPsLeaveAddressesButNoAlignedPrefix(t *testing.T) {
	for _, c := range []struct {
		name    string
		scatter bool
		want    string
	}{
		{"in order, the IPs pack the subnet's start and /28s remain", false, ""},
		{"scattered as EC2 does, every /28 holds an IP: InsufficientCidrBlocks", true, CodeInsufficientCidrBlocks},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, nil)
			sn := smallSubnet(t, w, c.scatter)
			fragment(t, w, sn, 120)
			if free := available(t, w, sn); free < 16 {
				t.Fatalf("only %d addresses left", free)
			}
			_, err := w.ec2.CreateNetworkInterface(ctxT(t), &ec2.CreateNetworkInterfaceInput{SubnetId: &sn, Ipv4PrefixCount: aws.Int32(1)})
			if c.want == "" {
				if err != nil {
					t.Fatalf("a prefix in an unfragmented subnet: %v", err)
				}
				return
			}
			wantAPIError(t, err, c.want, "", http.StatusBadRequest)
		})
	}
}

func TestSubnetCidrReservations(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	sn := smallSubnet(t, w, true)
	reserve := func(cidr string, typ types.SubnetCidrReservationType) string {
		t.Helper()
		out, err := w.ec2.CreateSubnetCidrReservation(ctx, &ec2.CreateSubnetCidrReservationInput{SubnetId: &sn, Cidr: &cidr,
			ReservationType: typ, Description: aws.String("for pods")})
		if err != nil {
			t.Fatalf("reserving %s: %v", cidr, err)
		}
		r := out.SubnetCidrReservation
		if aws.ToString(r.Cidr) != cidr || r.ReservationType != typ || aws.ToString(r.SubnetId) != sn || aws.ToString(r.OwnerId) == "" {
			t.Fatalf("reservation = %+v", r)
		}
		return aws.ToString(r.SubnetCidrReservationId)
	}
	prefixRes := reserve("10.0.64.128/26", types.SubnetCidrReservationTypePrefix)
	explicitRes := reserve("10.0.64.64/28", types.SubnetCidrReservationTypeExplicit)
	_, err := w.ec2.CreateSubnetCidrReservation(ctx, &ec2.CreateSubnetCidrReservationInput{SubnetId: &sn, Cidr: aws.String("10.0.64.128/28"),
		ReservationType: types.SubnetCidrReservationTypeExplicit})
	wantAPIError(t, err, CodeInvalidParameterValue, "", http.StatusBadRequest)

	// Counted IPs never land in a reservation, though they are scattered over the rest.
	for _, a := range fragment(t, w, sn, 120) {
		if netip.MustParsePrefix("10.0.64.128/26").Contains(a) || netip.MustParsePrefix("10.0.64.64/28").Contains(a) {
			t.Fatalf("counted address %s is inside a reservation", a)
		}
	}
	// A named address in an explicit reservation is what that reservation is for.
	if _, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: &sn, PrivateIpAddress: aws.String("10.0.64.70")}); err != nil {
		t.Fatalf("a named address in the explicit reservation: %v", err)
	}
	// Counted prefixes come from the prefix reservation, although the rest of the subnet is fragmented...
	out, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: &sn, Ipv4PrefixCount: aws.Int32(4)})
	if err != nil {
		t.Fatalf("4 prefixes from the reservation: %v", err)
	}
	for _, p := range prefixesOf(*out.NetworkInterface) {
		if !netip.MustParsePrefix("10.0.64.128/26").Overlaps(netip.MustParsePrefix(p)) {
			t.Errorf("prefix %s is outside the prefix reservation", p)
		}
	}
	// ...until it is used up.
	_, err = w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: &sn, Ipv4PrefixCount: aws.Int32(1)})
	wantAPIError(t, err, CodeInsufficientCidrBlocks, "", http.StatusBadRequest)

	list := func(filters ...types.Filter) []string {
		t.Helper()
		out, err := w.ec2.GetSubnetCidrReservations(ctx, &ec2.GetSubnetCidrReservationsInput{SubnetId: &sn, Filters: filters})
		if err != nil {
			t.Fatalf("listing reservations: %v", err)
		}
		var ids []string
		for _, r := range out.SubnetIpv4CidrReservations {
			ids = append(ids, aws.ToString(r.SubnetCidrReservationId))
		}
		return ids
	}
	if ids := list(); len(ids) != 2 {
		t.Errorf("reservations = %v, want 2", ids)
	}
	if ids := list(types.Filter{Name: aws.String("reservationType"), Values: []string{"prefix"}}); len(ids) != 1 || ids[0] != prefixRes {
		t.Errorf("prefix reservations = %v, want [%s]", ids, prefixRes)
	}
	if _, err := w.ec2.DeleteSubnetCidrReservation(ctx, &ec2.DeleteSubnetCidrReservationInput{SubnetCidrReservationId: &explicitRes}); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if ids := list(); len(ids) != 1 || ids[0] != prefixRes {
		t.Errorf("after deleting %s: %v", explicitRes, ids)
	}
	_, err = w.ec2.DeleteSubnetCidrReservation(ctx, &ec2.DeleteSubnetCidrReservationInput{SubnetCidrReservationId: &explicitRes})
	wantAPIError(t, err, "InvalidSubnetCidrReservationID.NotFound", "", http.StatusBadRequest)
}

func TestTheAWSCLIAssignsAndListsPrefixes(t *testing.T) {
	testenv.RequireTool(t, "aws")
	w := newWorld(t, nil)
	aws := w.awsCLI(t)
	assigned := aws("assign-private-ip-addresses", "--network-interface-id", w.inst.PrimaryENI, "--ipv4-prefix-count", "1",
		"--query", "AssignedIpv4Prefixes[0].Ipv4Prefix")
	if p, err := netip.ParsePrefix(assigned); err != nil || p.Bits() != 28 {
		t.Fatalf("assigned %q, want a /28", assigned)
	}
	if got := aws("describe-network-interfaces", "--network-interface-ids", w.inst.PrimaryENI, "--query", "NetworkInterfaces[0].Ipv4Prefixes[].Ipv4Prefix"); got != assigned {
		t.Errorf("described prefixes %q, want %q", got, assigned)
	}
}
