// Package simworld builds, for tests, one simulated EC2 world in process: an ec2sim with a VPC, a subnet and
// one instance, served over HTTP so that the controller reaches it through the real SDK, and a node
// controller for that instance with its agent API on a unix socket. (test/simnode is the binary-level
// counterpart, for the demo and the end-to-end tests.)
package simworld

import (
	"log/slog"
	"net/netip"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// The world's fixed names and addresses.
const (
	VPCID    = "vpc-1"
	VPCCIDR  = "10.0.0.0/16"
	SubnetID = "subnet-1"
	AZ       = "us-west-2a"
)

// Options shape the world. The zero value is an m5.large in 10.0.0.0/20, on the wall clock, with AWS's
// request buckets on.
type Options struct {
	// Type is the instance type (default m5.large); its limits come from ec2sim's table.
	Type string
	// Factor speeds the simulator's and the controller's shared clock up; 0 is the wall clock.
	Factor float64
	// NoThrottling turns AWS's token buckets off. It is a negative so that the zero value keeps them on,
	// as ec2sim.DefaultConfig does.
	NoThrottling bool
	// VPCCIDR is the VPC's block (default VPCCIDR).
	VPCCIDR string
	// Subnet is the instance's subnet. Its ID, VPC, CIDR and zone default to SubnetID, VPCID, 10.0.0.0/20
	// and AZ; the rest (Scatter, say) is taken as given. The CIDR must lie inside the VPC's block.
	Subnet ec2sim.SubnetSpec
	// Server places the simulator's listeners (default: loopback of the test's own namespace).
	Server ec2sim.ServerOptions
	// DualStack gives the VPC the IPv6 /56 ec2sim.DualStackVPCIPv6 and the subnet, unless Subnet names its
	// own, the /64 ec2sim.DualStackSubnetAIPv6, as an IPv6 EKS cluster's VPC has them.
	DualStack bool
}

// World is one simulated VPC with one instance, served (on loopback unless Options.Server says otherwise) until
// the test ends.
type World struct {
	Sim      *ec2sim.Sim
	Server   *ec2sim.Server
	Instance ec2sim.Instance
	// Clock is shared by the simulator and everything the world builds: a *clock.Scaled when
	// Options.Factor is set, else clock.Real.
	Clock clock.Clock
	// Log is the log of the EC2 clients and nodes the world builds: errors only, or everything when the
	// environment sets ENIWIRE_TEST_LOG.
	Log *slog.Logger

	limits ec2sim.InstanceType
}

// New builds the world and serves it; the server closes when tb ends.
func New(tb testing.TB, o Options) *World {
	tb.Helper()
	if o.Type == "" {
		o.Type = "m5.large"
	}
	if o.VPCCIDR == "" {
		o.VPCCIDR = VPCCIDR
	}
	subnet := o.Subnet
	if subnet.ID == "" {
		subnet.ID = SubnetID
	}
	if subnet.VPCID == "" {
		subnet.VPCID = VPCID
	}
	if subnet.CIDR == "" {
		subnet.CIDR = "10.0.0.0/20"
	}
	if subnet.AZ == "" {
		subnet.AZ = AZ
	}
	it, ok := ec2sim.LookupInstanceType(o.Type)
	if !ok {
		tb.Fatalf("instance type %s has no limits in ec2sim", o.Type)
	}
	cfg := ec2sim.DefaultConfig()
	if o.Factor != 0 {
		cfg.Clock = clock.NewScaled(o.Factor)
	}
	cfg.Throttling = !o.NoThrottling
	sim := ec2sim.New(cfg)
	if err := sim.AddVPC(VPCID, o.VPCCIDR); err != nil {
		tb.Fatalf("adding VPC: %v", err)
	}
	if o.DualStack {
		if _, err := sim.AddVPCIPv6Block(VPCID, ec2sim.DualStackVPCIPv6); err != nil {
			tb.Fatalf("adding the VPC's IPv6 block: %v", err)
		}
		if subnet.IPv6CIDR == "" {
			subnet.IPv6CIDR = ec2sim.DualStackSubnetAIPv6
		}
	}
	if err := sim.AddSubnet(subnet); err != nil {
		tb.Fatalf("adding subnet: %v", err)
	}
	inst, err := sim.AddInstance(ec2sim.InstanceSpec{Type: o.Type, SubnetID: subnet.ID})
	if err != nil {
		tb.Fatalf("adding instance: %v", err)
	}
	return &World{Sim: sim, Server: ec2sim.StartTestWith(tb, sim, o.Server), Instance: inst, Clock: cfg.Clock, Log: testLog(), limits: it}
}

// testLog logs errors to stderr, or everything when ENIWIRE_TEST_LOG is set.
func testLog() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("ENIWIRE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// EC2Options change the EC2 client EC2With builds. The zero value is EC2's.
type EC2Options struct {
	// HTTPClient carries the SDK's requests; nil is ec2sim's, which owns the request body as the agent's does.
	HTTPClient ec2.HTTPClient
	// Metrics registers the client's metrics; nil registers none.
	Metrics prometheus.Registerer
}

// EC2 returns the controller's view of EC2: the real SDK client against the simulator (three attempts a
// call, as the agent configures it) behind the rate-limiting wrapper, on the world's clock.
func (w *World) EC2(tb testing.TB) *ec2client.Client {
	tb.Helper()
	return w.EC2With(tb, EC2Options{})
}

// EC2With is EC2 changed by o.
func (w *World) EC2With(tb testing.TB, o EC2Options) *ec2client.Client {
	tb.Helper()
	sdk := w.Server.EC2Client(tb, func(so *ec2.Options) {
		so.Retryer = ec2client.NewSDKRetryer(3)
		if o.HTTPClient != nil {
			so.HTTPClient = o.HTTPClient
		}
	})
	c, err := ec2client.New(sdk, ec2client.Config{Clock: w.Clock}, o.Metrics, w.Log)
	if err != nil {
		tb.Fatalf("wrapping the EC2 client: %v", err)
	}
	return c
}

// NodeInfo is what the agent would read from IMDS and DescribeInstanceTypes for the instance: its IPv6 facts
// are its subnet's and VPC's IPv6 blocks (the /80s it holds come later, from the books).
func (w *World) NodeInfo() metadata.Node {
	n := NodeOf(w.Instance, LimitsOf(w.limits))
	st := w.Sim.Snapshot()
	for _, sn := range st.Subnets {
		if sn.ID == w.Instance.SubnetID && sn.IPv6CIDR != "" {
			n.IPv6.SubnetCIDRs = append(n.IPv6.SubnetCIDRs, netip.MustParsePrefix(sn.IPv6CIDR))
		}
	}
	for _, v := range st.VPCs {
		if v.ID == w.Instance.VPCID {
			for _, b := range v.IPv6CIDRBlocks {
				n.IPv6.VPCCIDRs = append(n.IPv6.VPCCIDRs, netip.MustParsePrefix(b))
			}
		}
	}
	return n
}

// NewNode builds a node controller for the instance with cfg, on the world's clock, EC2 client and log. An
// empty cfg.StateDir becomes a temp dir of tb. The node is not started (see Serve) and the caller closes it.
func (w *World) NewNode(tb testing.TB, cfg controller.Config) *controller.Node {
	tb.Helper()
	return w.NewNodeWith(tb, cfg, controller.Deps{})
}

// NewNodeWith is NewNode with deps, whose EC2 client, node facts, clock and logger default to the world's.
func (w *World) NewNodeWith(tb testing.TB, cfg controller.Config, deps controller.Deps) *controller.Node {
	tb.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = tb.TempDir()
	}
	if deps.EC2 == nil {
		deps.EC2 = w.EC2(tb)
	}
	if deps.Node.InstanceID == "" {
		deps.Node = w.NodeInfo()
	}
	if deps.Clock == nil {
		deps.Clock = w.Clock
	}
	if deps.Logger == nil {
		deps.Logger = w.Log
	}
	node, err := controller.New(cfg, deps)
	if err != nil {
		tb.Fatalf("building the node controller: %v", err)
	}
	return node
}
