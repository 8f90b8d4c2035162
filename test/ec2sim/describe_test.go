package ec2sim

import (
	"slices"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeNetworkInterfacesPagesThroughEveryENIOnce(t *testing.T) {
	w := newWorld(t, nil)
	want := []string{w.inst.PrimaryENI}
	for range 12 {
		want = append(want, *w.createENI(t, nil).NetworkInterfaceId)
	}
	sort.Strings(want)
	p := ec2.NewDescribeNetworkInterfacesPaginator(w.ec2, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	var got []string
	var sizes []int
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page.NetworkInterfaces))
		for _, ni := range page.NetworkInterfaces {
			got = append(got, *ni.NetworkInterfaceId)
		}
	}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{5, 5, 3}) {
		t.Fatalf("pages %v gave %v, want %v", sizes, got, want)
	}
}

func TestDescribeInstancesAndSubnetsPaginate(t *testing.T) {
	w := newWorld(t, nil)
	for range 6 {
		if _, err := w.sim.AddInstance(InstanceSpec{Type: "t3.medium", SubnetID: DefaultSubnetB}); err != nil {
			t.Fatal(err)
		}
	}
	p := ec2.NewDescribeInstancesPaginator(w.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5),
		Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"running"}}}})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Reservations)
	}
	if n != 7 {
		t.Fatalf("paged through %d instances, want 7", n)
	}
	types_ := ec2.NewDescribeInstanceTypesPaginator(w.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	m := 0
	for types_.HasMorePages() {
		page, err := types_.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		m += len(page.InstanceTypes)
	}
	if m != len(InstanceTypes()) {
		t.Fatalf("paged through %d instance types, want %d", m, len(InstanceTypes()))
	}
}

func TestDescribeNetworkInterfacesFilters(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	tagged := w.createENI(t, &ec2.CreateNetworkInterfaceInput{Description: aws.String("aws-K8S-" + w.inst.ID),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(w.inst.ID)}}}}})
	attached := w.createENI(t, nil)
	if _, err := w.attach(t, *attached.NetworkInterfaceId, w.inst.ID, 1); err != nil {
		t.Fatal(err)
	}
	other := w.createENI(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetB)})
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	cases := []struct {
		name    string
		filters []types.Filter
		want    []string
	}{
		{"attachment.instance-id finds the instance's ENIs", []types.Filter{f("attachment.instance-id", w.inst.ID)}, []string{w.inst.PrimaryENI, *attached.NetworkInterfaceId}},
		{"attachment.status finds attached ENIs", []types.Filter{f("attachment.status", "attached")}, []string{w.inst.PrimaryENI, *attached.NetworkInterfaceId}},
		{"tag:KEY matches the value", []types.Filter{f("tag:node.k8s.amazonaws.com/instance_id", w.inst.ID)}, []string{*tagged.NetworkInterfaceId}},
		{"tag-key matches the key", []types.Filter{f("tag-key", "node.k8s.amazonaws.com/instance_id")}, []string{*tagged.NetworkInterfaceId}},
		{"status available excludes attached ENIs", []types.Filter{f("status", "available")}, []string{*tagged.NetworkInterfaceId, *other.NetworkInterfaceId}},
		{"subnet-id narrows to a subnet", []types.Filter{f("subnet-id", DefaultSubnetB)}, []string{*other.NetworkInterfaceId}},
		{"vpc-id finds all", []types.Filter{f("vpc-id", DefaultVPC), f("subnet-id", DefaultSubnetA)}, []string{w.inst.PrimaryENI, *tagged.NetworkInterfaceId, *attached.NetworkInterfaceId}},
		{"description takes wildcards", []types.Filter{f("description", "aws-K8S-*")}, []string{*tagged.NetworkInterfaceId}},
		{"values of one filter are ORed", []types.Filter{f("network-interface-id", *tagged.NetworkInterfaceId, *other.NetworkInterfaceId)}, []string{*tagged.NetworkInterfaceId, *other.NetworkInterfaceId}},
		{"no match is an empty answer", []types.Filter{f("tag:absent", "x")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := w.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: tc.filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ni := range out.NetworkInterfaces {
				got = append(got, *ni.NetworkInterfaceId)
			}
			want := slices.Clone(tc.want)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestDescribeInstanceTypesReportsPublishedNetworkLimits(t *testing.T) {
	w := newWorld(t, nil)
	cases := []struct {
		typ        types.InstanceType
		enis, ipv4 int32
	}{
		{"t3.medium", 3, 6}, {"m5.large", 3, 10}, {"m5.4xlarge", 8, 30}, {"m4.4xlarge", 8, 30}, {"c5.18xlarge", 15, 50},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ), func(t *testing.T) {
			out, err := w.ec2.DescribeInstanceTypes(ctxT(t), &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{tc.typ}})
			if err != nil {
				t.Fatal(err)
			}
			ni := out.InstanceTypes[0].NetworkInfo
			if aws.ToInt32(ni.MaximumNetworkInterfaces) != tc.enis || aws.ToInt32(ni.Ipv4AddressesPerInterface) != tc.ipv4 ||
				len(ni.NetworkCards) != 1 || aws.ToInt32(ni.NetworkCards[0].MaximumNetworkInterfaces) != tc.enis ||
				aws.ToInt32(ni.DefaultNetworkCardIndex) != 0 {
				t.Fatalf("network info = %+v", ni)
			}
		})
	}
	_, err := w.ec2.DescribeInstanceTypes(ctxT(t), &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"x9.huge"}})
	wantAPIError(t, err, CodeInvalidInstanceType, "The following supplied instance types do not exist: [x9.huge]", 400)
}
