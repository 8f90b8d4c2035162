package ec2sim

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// newPodWorld is newWorld with PodSubnetsSeed: node subnets in three zones and, in the secondary block
// 100.64.0.0/16, a tagged pod subnet per zone.
func newPodWorld(t *testing.T) *world {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Throttling = false
	s := New(cfg)
	insts, err := s.Load(PodSubnetsSeed(cfg.Region))
	if err != nil {
		t.Fatal(err)
	}
	srv := StartTest(t, s)
	return &world{sim: s, srv: srv, ec2: srv.EC2Client(t, func(o *ec2.Options) { o.RetryMaxAttempts = 1 }), inst: insts[0]}
}

func sdkFilter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

func tagMap(tags []types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

func sorted(xs ...string) []string {
	out := slices.Clone(xs)
	sort.Strings(out)
	return out
}

func TestDescribeSubnetsFindsPodSubnetsByZoneAndTag(t *testing.T) {
	w := newPodWorld(t)
	ctx := ctxT(t)
	cluster := "kubernetes.io/cluster/" + SeedCluster
	cases := []struct {
		name    string
		ids     []string
		filters []types.Filter
		want    []string
	}{
		{"vpc-id and availability-zone give the zone's node and pod subnets",
			nil, []types.Filter{sdkFilter("vpc-id", DefaultVPC), sdkFilter("availability-zone", "us-west-2a")},
			[]string{DefaultSubnetA, PodSubnetA}},
		{"tag:kubernetes.io/role/cni=1 gives the pod subnets of every zone",
			nil, []types.Filter{sdkFilter("tag:"+TagCNIRole, "1")}, []string{PodSubnetA, PodSubnetB, PodSubnetC}},
		{"tag-key of the cluster tag with a zone gives that zone's pod subnet",
			nil, []types.Filter{sdkFilter("tag-key", cluster), sdkFilter("availability-zone", "us-west-2c")}, []string{PodSubnetC}},
		{"cidr-block takes wildcards", nil, []types.Filter{sdkFilter("cidr-block", "100.64.*")}, []string{PodSubnetA, PodSubnetB, PodSubnetC}},
		{"availability-zone-id names the zone by id", nil, []types.Filter{sdkFilter("availability-zone-id", "usw2-az2")}, []string{DefaultSubnetB, PodSubnetB}},
		{"state available is every subnet", nil, []types.Filter{sdkFilter("state", "available")},
			[]string{DefaultSubnetA, DefaultSubnetB, DefaultSubnetC, PodSubnetA, PodSubnetB, PodSubnetC}},
		{"subnet-id filters an id list", []string{DefaultSubnetA, PodSubnetA}, []types.Filter{sdkFilter("subnet-id", PodSubnetA)}, []string{PodSubnetA}},
		{"a tag no subnet has matches nothing", nil, []types.Filter{sdkFilter("tag:"+TagCNIRole, "0")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: tc.ids, Filters: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, sn := range out.Subnets {
				got = append(got, aws.ToString(sn.SubnetId))
			}
			if want := sorted(tc.want...); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}

	t.Run("a pod subnet carries the fields the SDK reads", func(t *testing.T) {
		out, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{PodSubnetB}})
		if err != nil {
			t.Fatal(err)
		}
		sn := out.Subnets[0]
		// A /19 has 8192 addresses, of which EC2 reserves five.
		if aws.ToString(sn.VpcId) != DefaultVPC || aws.ToString(sn.CidrBlock) != "100.64.32.0/19" ||
			aws.ToString(sn.AvailabilityZone) != "us-west-2b" || aws.ToString(sn.AvailabilityZoneId) != "usw2-az2" ||
			aws.ToInt32(sn.AvailableIpAddressCount) != 8187 || sn.State != types.SubnetStateAvailable {
			t.Fatalf("subnet = %+v", sn)
		}
		if tags := tagMap(sn.Tags); tags[TagCNIRole] != "1" || tags[cluster] != "shared" || len(tags) != 2 {
			t.Fatalf("tags = %v", tags)
		}
	})

	t.Run("a subnet added at run time in a new block, with tags, is described", func(t *testing.T) {
		if _, err := w.sim.AddVPCCIDRBlock(DefaultVPC, "100.65.0.0/16"); err != nil {
			t.Fatal(err)
		}
		spec := SubnetSpec{ID: "subnet-0e1a1e00000006501", VPCID: DefaultVPC, CIDR: "100.65.0.0/24", AZ: "us-west-2a",
			Tags: map[string]string{TagCNIRole: "0"}}
		if err := w.sim.AddSubnet(spec); err != nil {
			t.Fatal(err)
		}
		out, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{sdkFilter("tag:"+TagCNIRole, "0")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Subnets) != 1 || aws.ToString(out.Subnets[0].SubnetId) != spec.ID || aws.ToInt32(out.Subnets[0].AvailableIpAddressCount) != 251 {
			t.Fatalf("subnets = %+v", out.Subnets)
		}
	})
}

func TestAddSubnetStaysInsideTheVPCsBlocks(t *testing.T) {
	w := newPodWorld(t)
	cases := []struct {
		name string
		spec SubnetSpec
	}{
		{"outside every block", SubnetSpec{VPCID: DefaultVPC, CIDR: "100.66.0.0/24"}},
		{"wider than its block", SubnetSpec{VPCID: DefaultVPC, CIDR: "100.64.0.0/15"}},
		{"overlapping a pod subnet", SubnetSpec{VPCID: DefaultVPC, CIDR: "100.64.16.0/24"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := w.sim.AddSubnet(tc.spec); err == nil {
				t.Fatalf("AddSubnet(%+v) succeeded", tc.spec)
			}
		})
	}
	t.Run("a block overlapping another is refused", func(t *testing.T) {
		if _, err := w.sim.AddVPCCIDRBlock(DefaultVPC, "100.64.128.0/17"); err == nil {
			t.Fatal("an overlapping block was associated")
		}
	})
	t.Run("a sixth block is refused", func(t *testing.T) {
		for i, b := range []string{"100.65.0.0/16", "100.66.0.0/16", "100.67.0.0/16"} {
			if _, err := w.sim.AddVPCCIDRBlock(DefaultVPC, b); err != nil {
				t.Fatalf("block %d: %v", i+3, err)
			}
		}
		if _, err := w.sim.AddVPCCIDRBlock(DefaultVPC, "100.68.0.0/16"); err == nil {
			t.Fatal("a sixth block was associated")
		}
	})
}

func TestDescribeVpcsListsEveryAssociatedBlock(t *testing.T) {
	w := newPodWorld(t)
	ctx := ctxT(t)
	if err := w.sim.AddVPC("vpc-0e1a1e00000000002", "172.31.0.0/16"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		ids     []string
		filters []types.Filter
		want    []string
	}{
		{"vpc-id", nil, []types.Filter{sdkFilter("vpc-id", DefaultVPC)}, []string{DefaultVPC}},
		{"cidr matches the primary block", nil, []types.Filter{sdkFilter("cidr", "172.31.0.0/16")}, []string{"vpc-0e1a1e00000000002"}},
		{"cidr does not match a secondary block", nil, []types.Filter{sdkFilter("cidr", "100.64.0.0/16")}, nil},
		{"cidr-block-association.cidr-block matches a secondary block", nil,
			[]types.Filter{sdkFilter("cidr-block-association.cidr-block", "100.64.0.0/16")}, []string{DefaultVPC}},
		{"tag:Name", nil, []types.Filter{sdkFilter("tag:Name", "eniwire-sim")}, []string{DefaultVPC}},
		{"no filter lists both", nil, nil, []string{DefaultVPC, "vpc-0e1a1e00000000002"}},
		{"an id list", []string{"vpc-0e1a1e00000000002"}, nil, []string{"vpc-0e1a1e00000000002"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := w.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: tc.ids, Filters: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range out.Vpcs {
				got = append(got, aws.ToString(v.VpcId))
			}
			if want := sorted(tc.want...); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}

	t.Run("the association set holds every block, associated, the primary first", func(t *testing.T) {
		if _, err := w.sim.AddVPCCIDRBlock(DefaultVPC, "100.65.0.0/16"); err != nil {
			t.Fatal(err)
		}
		out, err := w.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{DefaultVPC}})
		if err != nil {
			t.Fatal(err)
		}
		v := out.Vpcs[0]
		if aws.ToString(v.CidrBlock) != "10.0.0.0/16" || v.State != types.VpcStateAvailable || aws.ToString(v.OwnerId) != "111122223333" {
			t.Fatalf("vpc = %+v", v)
		}
		var blocks []string
		ids := map[string]bool{}
		for _, a := range v.CidrBlockAssociationSet {
			blocks = append(blocks, aws.ToString(a.CidrBlock))
			if a.CidrBlockState == nil || a.CidrBlockState.State != types.VpcCidrBlockStateCodeAssociated {
				t.Errorf("block %s state = %+v", aws.ToString(a.CidrBlock), a.CidrBlockState)
			}
			if id := aws.ToString(a.AssociationId); !strings.HasPrefix(id, "vpc-cidr-assoc-") || ids[id] {
				t.Errorf("association id %q is malformed or repeated", id)
			}
			ids[aws.ToString(a.AssociationId)] = true
		}
		if want := []string{"10.0.0.0/16", "100.64.0.0/16", "100.65.0.0/16"}; !slices.Equal(blocks, want) {
			t.Fatalf("blocks = %v, want %v", blocks, want)
		}
		if tags := tagMap(v.Tags); tags["Name"] != "eniwire-sim" {
			t.Fatalf("tags = %v", tags)
		}
	})

	t.Run("an unknown VPC is InvalidVpcID.NotFound", func(t *testing.T) {
		_, err := w.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0404"}})
		wantAPIError(t, err, CodeInvalidVpcIDNotFound, "The vpc ID 'vpc-0404' does not exist", 400)
	})
}

func TestDescribeSecurityGroupsByIDVPCAndTag(t *testing.T) {
	w := newPodWorld(t)
	ctx := ctxT(t)
	if err := w.sim.AddVPC("vpc-0e1a1e00000000002", "172.31.0.0/16"); err != nil {
		t.Fatal(err)
	}
	other := w.sim.Snapshot().VPCs[1].DefaultSG
	def := w.inst.SecurityGroups[0]
	if err := w.sim.SetTags(def, map[string]string{"role": "nodes"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		ids     []string
		filters []types.Filter
		want    []string
	}{
		{"vpc-id gives the VPC's default and pod groups", nil, []types.Filter{sdkFilter("vpc-id", DefaultVPC)}, []string{def, PodGroup}},
		{"group-id", nil, []types.Filter{sdkFilter("group-id", PodGroup)}, []string{PodGroup}},
		{"group-name default is one per VPC", nil, []types.Filter{sdkFilter("group-name", "default")}, []string{def, other}},
		{"tag:Name", nil, []types.Filter{sdkFilter("tag:Name", "eniwire-pods")}, []string{PodGroup}},
		{"a tag set through the admin API", nil, []types.Filter{sdkFilter("tag-key", "role")}, []string{def}},
		{"an id list", []string{PodGroup, other}, nil, []string{PodGroup, other}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := w.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: tc.ids, Filters: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range out.SecurityGroups {
				got = append(got, aws.ToString(g.GroupId))
			}
			if want := sorted(tc.want...); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}

	t.Run("a group carries its name, description, VPC and tags", func(t *testing.T) {
		out, err := w.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{PodGroup}})
		if err != nil {
			t.Fatal(err)
		}
		g := out.SecurityGroups[0]
		if aws.ToString(g.GroupName) != "eniwire-pods" || aws.ToString(g.Description) != "pods of the eniwire cluster" ||
			aws.ToString(g.VpcId) != DefaultVPC || tagMap(g.Tags)["Name"] != "eniwire-pods" {
			t.Fatalf("group = %+v", g)
		}
	})

	t.Run("an unknown group is InvalidGroup.NotFound", func(t *testing.T) {
		_, err := w.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0404"}})
		wantAPIError(t, err, CodeInvalidGroupNotFound, "The security group 'sg-0404' does not exist", 400)
	})

	t.Run("CreateTags tags a VPC and a group, DeleteTags untags them", func(t *testing.T) {
		if _, err := w.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{DefaultVPC, PodGroup},
			Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("net")}}}); err != nil {
			t.Fatal(err)
		}
		st := w.sim.Snapshot()
		if st.VPCs[0].Tags["team"] != "net" || st.Groups[slices.IndexFunc(st.Groups, func(g SecurityGroupSpec) bool { return g.ID == PodGroup })].Tags["team"] != "net" {
			t.Fatalf("tags not set: %+v %+v", st.VPCs[0], st.Groups)
		}
		if _, err := w.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{DefaultVPC},
			Tags: []types.Tag{{Key: aws.String("team")}}}); err != nil {
			t.Fatal(err)
		}
		if _, ok := w.sim.Snapshot().VPCs[0].Tags["team"]; ok {
			t.Fatal("DeleteTags left the VPC's tag")
		}
		_, err := w.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"vpc-0404"},
			Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
		wantAPIError(t, err, CodeInvalidVpcIDNotFound, "The vpc ID 'vpc-0404' does not exist", 400)
	})
}

func TestCreateNetworkInterfaceInAPodSubnetChecksSubnetAndGroups(t *testing.T) {
	w := newPodWorld(t)
	ctx := ctxT(t)
	if err := w.sim.AddVPC("vpc-0e1a1e00000000002", "172.31.0.0/16"); err != nil {
		t.Fatal(err)
	}
	foreign, err := w.sim.AddSecurityGroup(SecurityGroupSpec{VPCID: "vpc-0e1a1e00000000002", Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("an ENI in a 100.64 pod subnet with the pod group takes its addresses there", func(t *testing.T) {
		ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetA), Groups: []string{PodGroup},
			SecondaryPrivateIpAddressCount: aws.Int32(2)})
		pod := netip.MustParsePrefix("100.64.0.0/19")
		for _, ip := range ni.PrivateIpAddresses {
			if !pod.Contains(netip.MustParseAddr(aws.ToString(ip.PrivateIpAddress))) {
				t.Errorf("address %s outside %s", aws.ToString(ip.PrivateIpAddress), pod)
			}
		}
		if aws.ToString(ni.SubnetId) != PodSubnetA || aws.ToString(ni.AvailabilityZone) != "us-west-2a" || aws.ToString(ni.VpcId) != DefaultVPC ||
			len(ni.Groups) != 1 || aws.ToString(ni.Groups[0].GroupId) != PodGroup || aws.ToString(ni.Groups[0].GroupName) != "eniwire-pods" {
			t.Fatalf("ENI = %+v", ni)
		}
	})

	errCases := []struct {
		name, code, msg string
		in              *ec2.CreateNetworkInterfaceInput
	}{
		{"an unknown subnet is InvalidSubnetID.NotFound", CodeInvalidSubnetIDNotFound, "The subnet ID 'subnet-0404' does not exist",
			&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0404")}},
		{"an unknown group is InvalidGroup.NotFound", CodeInvalidGroupNotFound, "The security group 'sg-0404' does not exist",
			&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetA), Groups: []string{PodGroup, "sg-0404"}}},
		{"a group of another VPC is InvalidGroup.NotFound", CodeInvalidGroupNotFound,
			"The security group '" + foreign + "' does not exist in VPC '" + DefaultVPC + "'",
			&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetB), Groups: []string{foreign}}},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			before := w.sim.Snapshot()
			_, err := w.ec2.CreateNetworkInterface(ctx, tc.in)
			wantAPIError(t, err, tc.code, tc.msg, 400)
			if after := w.sim.Snapshot(); len(after.ENIs) != len(before.ENIs) {
				t.Fatalf("a failed create left an ENI: %d -> %d", len(before.ENIs), len(after.ENIs))
			}
		})
	}
}

func TestExhaustedSubnetAnswersInsufficientFreeAddresses(t *testing.T) {
	w := newPodWorld(t)
	ctx := ctxT(t)
	const msg = "The specified subnet does not have enough free addresses to satisfy the request."
	available := func(t *testing.T, id string) int32 {
		t.Helper()
		out, err := w.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
	}
	// An ENI made before the exhaustion keeps working in its subnet.
	ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetA)})

	t.Run("an exhausted subnet has no free address and refuses new ENIs and IPs", func(t *testing.T) {
		taken, err := w.sim.ExhaustSubnet(PodSubnetA, 0)
		if err != nil {
			t.Fatal(err)
		}
		if taken != 8187-1 {
			t.Fatalf("took %d addresses, want %d", taken, 8187-1)
		}
		if got := available(t, PodSubnetA); got != 0 {
			t.Fatalf("AvailableIpAddressCount = %d, want 0", got)
		}
		_, err = w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetA)})
		wantAPIError(t, err, CodeInsufficientFreeAddresses, msg, 400)
		_, err = w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId,
			SecondaryPrivateIpAddressCount: aws.Int32(1)})
		wantAPIError(t, err, CodeInsufficientFreeAddresses, msg, 400)
	})

	t.Run("the other subnets of the zone still serve", func(t *testing.T) {
		w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA), SecondaryPrivateIpAddressCount: aws.Int32(5)})
	})

	t.Run("keeping some free serves requests up to that many", func(t *testing.T) {
		if _, err := w.sim.ExhaustSubnet(PodSubnetB, 3); err != nil {
			t.Fatal(err)
		}
		if got := available(t, PodSubnetB); got != 3 {
			t.Fatalf("AvailableIpAddressCount = %d, want 3", got)
		}
		b := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetB), SecondaryPrivateIpAddressCount: aws.Int32(1)})
		_, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId,
			SecondaryPrivateIpAddressCount: aws.Int32(2)})
		wantAPIError(t, err, CodeInsufficientFreeAddresses, msg, 400)
		if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId,
			SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a refill gives the addresses back", func(t *testing.T) {
		released, err := w.sim.RefillSubnet(PodSubnetA)
		if err != nil {
			t.Fatal(err)
		}
		if released != 8186 || available(t, PodSubnetA) != 8186 {
			t.Fatalf("released %d, available %d, want 8186 each", released, available(t, PodSubnetA))
		}
		if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId,
			SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the admin API exhausts and refills a subnet", func(t *testing.T) {
		post := func(path, body string) map[string]int {
			t.Helper()
			resp, err := http.Post(w.srv.AdminURL()+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]int
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s: %d %v", path, resp.StatusCode, err)
			}
			return out
		}
		if out := post("/subnets/"+PodSubnetC+"/exhaust", `{"keepFree": 1}`); out["taken"] != 8186 || available(t, PodSubnetC) != 1 {
			t.Fatalf("exhaust answered %v, available %d", out, available(t, PodSubnetC))
		}
		if out := post("/subnets/"+PodSubnetC+"/refill", ""); out["released"] != 8186 || available(t, PodSubnetC) != 8187 {
			t.Fatalf("refill answered %v, available %d", out, available(t, PodSubnetC))
		}
	})
}

func TestIMDSShowsEachENIsSubnetAndEveryVPCBlock(t *testing.T) {
	w := newPodWorld(t)
	ni := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(PodSubnetA), Groups: []string{PodGroup}})
	if _, err := w.attach(t, aws.ToString(ni.NetworkInterfaceId), w.inst.ID, 1); err != nil {
		t.Fatal(err)
	}
	c := w.srv.IMDSClient(t, w.inst.ID)
	mac := aws.ToString(ni.MacAddress)
	cases := map[string]string{
		"network/interfaces/macs/" + mac + "/subnet-id":                            PodSubnetA,
		"network/interfaces/macs/" + mac + "/subnet-ipv4-cidr-block":               "100.64.0.0/19",
		"network/interfaces/macs/" + mac + "/vpc-ipv4-cidr-blocks":                 "10.0.0.0/16\n100.64.0.0/16",
		"network/interfaces/macs/" + mac + "/vpc-ipv4-cidr-block":                  "10.0.0.0/16",
		"network/interfaces/macs/" + mac + "/security-group-ids":                   PodGroup,
		"network/interfaces/macs/" + mac + "/security-groups":                      "eniwire-pods",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/subnet-id":              DefaultSubnetA,
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/subnet-ipv4-cidr-block": "10.0.0.0/19",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/vpc-ipv4-cidr-blocks":   "10.0.0.0/16\n100.64.0.0/16",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/security-groups":        "default",
	}
	for path, want := range cases {
		t.Run(path, func(t *testing.T) {
			if got := mustIMDS(t, c, path); got != want {
				t.Fatalf("%s = %q, want %q", path, got, want)
			}
		})
	}
	t.Run("a block associated later shows at once", func(t *testing.T) {
		if _, err := w.sim.AddVPCCIDRBlock(DefaultVPC, "100.65.0.0/16"); err != nil {
			t.Fatal(err)
		}
		path := "network/interfaces/macs/" + mac + "/vpc-ipv4-cidr-blocks"
		if got, want := mustIMDS(t, c, path), "10.0.0.0/16\n100.64.0.0/16\n100.65.0.0/16"; got != want {
			t.Fatalf("%s = %q, want %q", path, got, want)
		}
	})
}

func TestDescribeVpcsAndSecurityGroupsPaginate(t *testing.T) {
	w := newPodWorld(t)
	ctx := ctxT(t)
	for i := range 6 {
		if _, err := w.sim.AddSecurityGroup(SecurityGroupSpec{VPCID: DefaultVPC, Name: "extra-" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
		if err := w.sim.AddVPC("", "172.16.0.0/16"); err != nil {
			t.Fatal(err)
		}
	}
	groups := ec2.NewDescribeSecurityGroupsPaginator(w.ec2, &ec2.DescribeSecurityGroupsInput{MaxResults: aws.Int32(5),
		Filters: []types.Filter{sdkFilter("vpc-id", DefaultVPC)}})
	var sizes []int
	seen := map[string]bool{}
	for groups.HasMorePages() {
		page, err := groups.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page.SecurityGroups))
		for _, g := range page.SecurityGroups {
			seen[aws.ToString(g.GroupId)] = true
		}
	}
	// The default group, the pod group and six more.
	if !slices.Equal(sizes, []int{5, 3}) || len(seen) != 8 {
		t.Fatalf("group pages %v with %d distinct groups, want [5 3] and 8", sizes, len(seen))
	}
	vpcs := ec2.NewDescribeVpcsPaginator(w.ec2, &ec2.DescribeVpcsInput{MaxResults: aws.Int32(5)})
	sizes, n := nil, map[string]bool{}
	for vpcs.HasMorePages() {
		page, err := vpcs.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page.Vpcs))
		for _, v := range page.Vpcs {
			n[aws.ToString(v.VpcId)] = true
		}
	}
	if !slices.Equal(sizes, []int{5, 2}) || len(n) != 7 {
		t.Fatalf("VPC pages %v with %d distinct VPCs, want [5 2] and 7", sizes, len(n))
	}
}

func TestASeedFileCarriesBlocksGroupsAndTags(t *testing.T) {
	path := t.TempDir() + "/seed.json"
	b, err := json.Marshal(PodSubnetsSeed("us-west-2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sd, err := ReadSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	s := New(DefaultConfig())
	if _, err := s.Load(sd); err != nil {
		t.Fatal(err)
	}
	st := s.Snapshot()
	if len(st.VPCs) != 1 || !slices.Equal(st.VPCs[0].CIDRBlocks, []string{"10.0.0.0/16", "100.64.0.0/16"}) ||
		st.VPCs[0].Tags["Name"] != "eniwire-sim" {
		t.Fatalf("VPCs = %+v", st.VPCs)
	}
	if len(st.Groups) != 2 || !slices.ContainsFunc(st.Groups, func(g SecurityGroupSpec) bool { return g.ID == PodGroup && g.Tags["Name"] == "eniwire-pods" }) {
		t.Fatalf("groups = %+v", st.Groups)
	}
	var pods []string
	for _, sn := range st.Subnets {
		if sn.Tags[TagCNIRole] == "1" {
			pods = append(pods, sn.ID+"@"+sn.AZ)
		}
	}
	if want := []string{PodSubnetA + "@us-west-2a", PodSubnetB + "@us-west-2b", PodSubnetC + "@us-west-2c"}; !slices.Equal(pods, want) {
		t.Fatalf("pod subnets = %v, want %v", pods, want)
	}
	if got := st.Instances[0].VPCCIDRs; !slices.Equal(got, []string{"10.0.0.0/16", "100.64.0.0/16"}) {
		t.Fatalf("instance VPCCIDRs = %v", got)
	}
}
