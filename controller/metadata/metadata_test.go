package metadata

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// fakeIMDS serves IMDSv2 from a map of paths (under /latest/meta-data/) to values; anything else is a 404,
// and a GET without the token is a 401, as on EC2.
type fakeIMDS struct {
	mu     sync.Mutex
	values map[string]string
}

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		fmt.Fprint(w, "tok")
		return
	}
	if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "tok" {
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	v, ok := f.values[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	fmt.Fprint(w, v)
}

func (f *fakeIMDS) set(path, v string) { f.mu.Lock(); f.values[path] = v; f.mu.Unlock() }
func (f *fakeIMDS) del(path string)    { f.mu.Lock(); delete(f.values, path); f.mu.Unlock() }

const (
	mac0 = "02:aa:00:00:00:01"
	mac1 = "02:aa:00:00:00:02"
)

func newFakeIMDS(t *testing.T) (*fakeIMDS, *imds.Client) {
	f := &fakeIMDS{values: map[string]string{
		"instance-id":                 "i-0123456789abcdef0",
		"instance-type":               "m5.large",
		"placement/availability-zone": "us-west-2a",
		"local-ipv4":                  "10.0.1.5",
		"mac":                         mac0,
		"network/interfaces/macs":     mac0 + "/\n" + mac1 + "/",
	}}
	for mac, v := range map[string]map[string]string{
		mac0: {"device-number": "0", "interface-id": "eni-0", "local-ipv4s": "10.0.1.5\n10.0.1.6", "subnet-id": "subnet-1",
			"subnet-ipv4-cidr-block": "10.0.1.0/24", "vpc-id": "vpc-1", "vpc-ipv4-cidr-blocks": "10.0.0.0/16\n100.64.0.0/16",
			"security-group-ids": "sg-1\nsg-2"},
		mac1: {"device-number": "1", "interface-id": "eni-1", "local-ipv4s": "10.0.1.20", "subnet-ipv4-cidr-block": "10.0.1.0/24"},
	} {
		for k, val := range v {
			f.values["network/interfaces/macs/"+mac+"/"+k] = val
		}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, imds.New(imds.Options{Endpoint: srv.URL})
}

// instanceTypes answers DescribeInstanceTypes from a table and counts the calls; Load needs nothing else of EC2.
type instanceTypes struct {
	ec2client.EC2API
	mu    sync.Mutex
	calls int
	info  map[string]types.NetworkInfo
	err   error
}

func (f *instanceTypes) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := &ec2.DescribeInstanceTypesOutput{}
	for _, t := range in.InstanceTypes {
		if ni, ok := f.info[string(t)]; ok {
			out.InstanceTypes = append(out.InstanceTypes, types.InstanceTypeInfo{InstanceType: t, NetworkInfo: &ni})
		}
	}
	return out, nil
}

func newInstanceTypes() *instanceTypes {
	return &instanceTypes{info: map[string]types.NetworkInfo{
		"m5.large": {MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10), MaximumNetworkCards: aws.Int32(1)},
		"p5.48xlarge": {MaximumNetworkInterfaces: aws.Int32(64), Ipv4AddressesPerInterface: aws.Int32(50), MaximumNetworkCards: aws.Int32(32),
			DefaultNetworkCardIndex: aws.Int32(0),
			NetworkCards: []types.NetworkCardInfo{
				{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(2)},
				{NetworkCardIndex: aws.Int32(1), MaximumNetworkInterfaces: aws.Int32(2)},
			}},
	}}
}

func TestLoadReadsTheNodeFromIMDSAndEC2(t *testing.T) {
	_, md := newFakeIMDS(t)
	api := newInstanceTypes()
	n, err := Load(context.Background(), md, api, t.TempDir())
	if err != nil {
		t.Fatalf("loading: %v", err)
	}
	want := &Node{
		InstanceID: "i-0123456789abcdef0", InstanceType: "m5.large", AZ: "us-west-2a", Region: "us-west-2",
		PrimaryMAC: mac0, PrimaryIP: netip.MustParseAddr("10.0.1.5"), VPCID: "vpc-1",
		VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")},
		SubnetID: "subnet-1", SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24"), SecurityGroups: []string{"sg-1", "sg-2"},
		Limits: Limits{MaxENIs: 3, IPv4PerENI: 10, NetworkCards: 1},
	}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", n, want)
	}
}

func TestLimitsAreCachedPerInstanceType(t *testing.T) {
	f, md := newFakeIMDS(t)
	api := newInstanceTypes()
	dir := filepath.Join(t.TempDir(), "state")
	ctx := context.Background()

	if _, err := Load(ctx, md, api, dir); err != nil {
		t.Fatalf("first load: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LimitsFile)); err != nil {
		t.Fatalf("the limits file was not written: %v", err)
	}
	n, err := Load(ctx, md, api, dir)
	if err != nil {
		t.Fatalf("second load: %v", err)
	}
	if api.calls != 1 {
		t.Errorf("two loads made %d DescribeInstanceTypes calls, want 1", api.calls)
	}
	if n.Limits.MaxENIs != 3 {
		t.Errorf("cached limits %+v", n.Limits)
	}

	// The instance was stopped and resized: the cache is for another type and is replaced.
	f.set("instance-type", "p5.48xlarge")
	n, err = Load(ctx, md, api, dir)
	if err != nil {
		t.Fatalf("load after a resize: %v", err)
	}
	if api.calls != 2 {
		t.Errorf("a new instance type made %d calls in all, want 2", api.calls)
	}
	if want := (Limits{MaxENIs: 2, IPv4PerENI: 50, NetworkCards: 32}); n.Limits != want {
		t.Errorf("limits of a multi-card type = %+v, want %+v (the default card's ENIs)", n.Limits, want)
	}

	// A corrupt file is not trusted.
	if err := os.WriteFile(filepath.Join(dir, LimitsFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, md, api, dir); err != nil {
		t.Fatalf("load over a corrupt cache: %v", err)
	}
	if api.calls != 3 {
		t.Errorf("a corrupt cache made %d calls in all, want 3", api.calls)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the cache directory holds %d entries, want only %s (no temporary files left)", len(entries), LimitsFile)
	}
}

func TestLoadFailures(t *testing.T) {
	tests := []struct {
		name    string
		change  func(f *fakeIMDS, api *instanceTypes)
		wantErr func(error) bool
	}{
		{name: "a missing instance id is ErrNotFound",
			change:  func(f *fakeIMDS, _ *instanceTypes) { f.del("instance-id") },
			wantErr: func(err error) bool { return errors.Is(err, ErrNotFound) }},
		{name: "a missing subnet CIDR of the primary ENI is ErrNotFound",
			change: func(f *fakeIMDS, _ *instanceTypes) {
				f.del("network/interfaces/macs/" + mac0 + "/subnet-ipv4-cidr-block")
			},
			wantErr: func(err error) bool { return errors.Is(err, ErrNotFound) }},
		{name: "a denied DescribeInstanceTypes keeps its EC2 code",
			change: func(_ *fakeIMDS, api *instanceTypes) {
				api.err = &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
			},
			wantErr: func(err error) bool { return ec2client.ErrorCode(err) == "UnauthorizedOperation" }},
		{name: "an unknown instance type is an error",
			change:  func(f *fakeIMDS, _ *instanceTypes) { f.set("instance-type", "x9.huge") },
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "x9.huge") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, md := newFakeIMDS(t)
			api := newInstanceTypes()
			tt.change(f, api)
			_, err := Load(context.Background(), md, api, t.TempDir())
			if !tt.wantErr(err) {
				t.Errorf("got %v", err)
			}
		})
	}
}

func TestENIsListsWhatIMDSShows(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *fakeIMDS)
		want   []IMDSENI
	}{
		{name: "every attached ENI with its addresses, by device index", change: func(*fakeIMDS) {},
			want: []IMDSENI{
				{MAC: mac0, ID: "eni-0", DeviceIndex: 0, IPs: addrs("10.0.1.5", "10.0.1.6"), SubnetID: "subnet-1", SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
				{MAC: mac1, ID: "eni-1", DeviceIndex: 1, IPs: addrs("10.0.1.20"), SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
			}},
		{name: "an ENI without local-ipv4s has no addresses",
			change: func(f *fakeIMDS) { f.del("network/interfaces/macs/" + mac1 + "/local-ipv4s") },
			want: []IMDSENI{
				{MAC: mac0, ID: "eni-0", DeviceIndex: 0, IPs: addrs("10.0.1.5", "10.0.1.6"), SubnetID: "subnet-1", SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
				{MAC: mac1, ID: "eni-1", DeviceIndex: 1, SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
			}},
		{name: "an ENI's delegated /28 prefixes are listed",
			change: func(f *fakeIMDS) { f.set("network/interfaces/macs/"+mac1+"/ipv4-prefix", "10.0.1.32/28\n10.0.1.48/28") },
			want: []IMDSENI{
				{MAC: mac0, ID: "eni-0", DeviceIndex: 0, IPs: addrs("10.0.1.5", "10.0.1.6"), SubnetID: "subnet-1", SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
				{MAC: mac1, ID: "eni-1", DeviceIndex: 1, IPs: addrs("10.0.1.20"), SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24"),
					IPv4Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.1.32/28"), netip.MustParsePrefix("10.0.1.48/28")}},
			}},
		{name: "an ENI still being attached is left out",
			change: func(f *fakeIMDS) { f.del("network/interfaces/macs/" + mac1 + "/interface-id") },
			want: []IMDSENI{
				{MAC: mac0, ID: "eni-0", DeviceIndex: 0, IPs: addrs("10.0.1.5", "10.0.1.6"), SubnetID: "subnet-1", SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
			}},
		{name: "an ENI on a second network card sorts after the first card's",
			change: func(f *fakeIMDS) {
				f.set("network/interfaces/macs/"+mac1+"/network-card", "1")
				f.set("network/interfaces/macs/"+mac1+"/device-number", "0")
			},
			want: []IMDSENI{
				{MAC: mac0, ID: "eni-0", DeviceIndex: 0, IPs: addrs("10.0.1.5", "10.0.1.6"), SubnetID: "subnet-1", SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
				{MAC: mac1, ID: "eni-1", DeviceIndex: 0, NetworkCard: 1, IPs: addrs("10.0.1.20"), SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, md := newFakeIMDS(t)
			tt.change(f)
			got, err := ENIs(context.Background(), md)
			if err != nil {
				t.Fatalf("listing ENIs: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}
