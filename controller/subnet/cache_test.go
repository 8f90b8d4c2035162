package subnet_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// The node's subnet and a subnet tagged for pods, both in the node's zone.
const (
	nodeSubnet = "subnet-1"
	podSubnet  = "subnet-0000000000000a001"
	podCIDR    = "100.64.0.0/19"
)

// memBooks are books in memory: the Placer reads and changes them as it would the node's.
type memBooks struct {
	mu sync.Mutex
	st journal.State
}

func (b *memBooks) View(fn func(st *journal.State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(&b.st)
}

func (b *memBooks) Update(_ context.Context, fn func(st *journal.State) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fn(&b.st)
}

// podWorld is the shared simulated world (test/simworld: the node's subnet and instance) with the pod subnet
// added, reached through the real SDK without the SDK's retries, so that a scripted fault reaches the Placer.
func podWorld(t *testing.T) (*ec2sim.Sim, *ec2.Client) {
	t.Helper()
	w := simworld.New(t, simworld.Options{Subnet: ec2sim.SubnetSpec{ID: nodeSubnet}})
	if _, err := w.Sim.AddVPCCIDRBlock(simworld.VPCID, "100.64.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if err := w.Sim.AddSubnet(ec2sim.SubnetSpec{ID: podSubnet, VPCID: simworld.VPCID, CIDR: podCIDR, AZ: simworld.AZ,
		Tags: map[string]string{subnet.TagCNIRole: "1"}}); err != nil {
		t.Fatal(err)
	}
	return w.Sim, w.Server.EC2Client(t, func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
}

// An ENI adopted in a pod subnet before discovery read its list waits for its subnet's CIDR (the datapath
// brings it up only with its gateway). When the read of that subnet by id failed, the failure stood for a
// minute even though discovery's list, read right after, showed the subnet: the placer and the candidates
// kept two records of the subnets read. With one, the list's read ends the failed one at once.
func TestASubnetDiscoveryListedEndsAFailedReadOfItByID(t *testing.T) {
	ctx := context.Background()
	sim, api := podWorld(t)
	books := &memBooks{st: journal.State{ENIs: []journal.ENI{{ID: "eni-adopted", SubnetID: podSubnet}}}}
	p := subnet.NewPlacer(subnet.Config{Discovery: true, VPCID: "vpc-1", AZ: "us-west-2a", SubnetID: nodeSubnet,
		SubnetCIDR: "10.0.0.0/20", Cluster: "test"},
		subnet.Deps{EC2: api, Books: books, Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler)})
	cidr := func() string {
		var c string
		books.View(func(st *journal.State) { c = st.ENIs[0].SubnetCIDR })
		return c
	}

	sim.Faults().Script("DescribeSubnets", "RequestLimitExceeded", 1)
	p.LearnSubnets(ctx)
	if c := cidr(); c != "" {
		t.Fatalf("the adopted ENI got CIDR %q from a failed read", c)
	}
	at, err := p.Place(ctx, 10)
	if err != nil || at.SubnetID != podSubnet || at.SubnetCIDR != podCIDR {
		t.Fatalf("placed in %+v (%v), want %s %s, the candidate with the most free addresses", at, err, podSubnet, podCIDR)
	}
	p.LearnSubnets(ctx)
	if c := cidr(); c != podCIDR {
		t.Errorf("the adopted ENI's subnet CIDR is %q after discovery listed %s, want %s at once", c, podSubnet, podCIDR)
	}
	if got := p.CIDROf(podSubnet); got != podCIDR {
		t.Errorf("CIDROf(%s) = %q, want %s", podSubnet, got, podCIDR)
	}
	if n := sim.Counters()["DescribeSubnets"].Calls; n != 2 {
		t.Errorf("%d DescribeSubnets, want 2: the failed read by id and discovery's list", n)
	}
}
