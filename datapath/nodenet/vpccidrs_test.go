package nodenet

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/snat"
)

// TestABlockAddedToTheVPCLeavesUntranslated: on a test node (testnode_test.go) opened with the VPC's first
// block only, traffic to 100.64.9.9 takes the host's default route and is masqueraded to the primary IP.
// Once SetVPCCIDRs adds 100.64.0.0/16 (the controller saw it in DescribeVpcs), that traffic leaves by the
// pod's ENI with the pod's own address, while traffic to the internet side (198.51.100.7) is still
// masqueraded.
func TestABlockAddedToTheVPCLeavesUntranslated(t *testing.T) {
	secondary := netip.MustParseAddrPort("100.64.9.9:7000")
	internet := netip.MustParseAddrPort("198.51.100.7:7000")
	n := newTestNode(t, func(string) string { return "" }, secondary.Addr(), internet.Addr())
	ctx := context.Background()
	sourceSeen := func(t *testing.T, dst netip.AddrPort) netip.Addr {
		t.Helper()
		src, ok := n.sourceSeen(t, n.vpc, dst, 5*time.Second)
		if !ok {
			t.Fatalf("nothing from the pod reached %s", dst)
		}
		return src
	}

	t.Run("before: a block unknown to the datapath is masqueraded like the internet", func(t *testing.T) {
		if src := sourceSeen(t, secondary); src != n.primaryIP {
			t.Fatalf("%s saw source %s, want the primary IP %s", secondary, src, n.primaryIP)
		}
	})
	// The masquerade rule is written in the namespace of the calling thread: the node's, as in the agent.
	n.in(t, n.node, "setting the VPC's blocks", func() error {
		return n.b.SetVPCCIDRs(ctx, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")})
	})
	t.Run("after SetVPCCIDRs: the new block sees the pod's own address, by the pod's ENI", func(t *testing.T) {
		before := n.rxOnENI(t)
		if src := sourceSeen(t, secondary); src != n.podIP {
			t.Fatalf("%s saw source %s, want the pod's %s", secondary, src, n.podIP)
		}
		if n.rxOnENI(t) == before {
			t.Fatalf("the datagram did not leave by the pod's ENI")
		}
	})
	t.Run("after SetVPCCIDRs: the internet side is still masqueraded", func(t *testing.T) {
		if src := sourceSeen(t, internet); src != n.primaryIP {
			t.Fatalf("%s saw source %s, want the primary IP %s", internet, src, n.primaryIP)
		}
	})
}

// TestExcludeSNATCIDRsAreVPCRoutes: AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS reach the routes map as VPC routes at
// Open and stay there when the VPC's blocks change, as the AWS VPC CNI treats them.
func TestExcludeSNATCIDRsAreVPCRoutes(t *testing.T) {
	excluded := netip.MustParsePrefix("172.16.0.0/16")
	n := newTestNode(t, func(name string) string {
		if name == snat.EnvExcludeSNATCIDRs {
			return excluded.String()
		}
		return ""
	})
	want := datapath.Route{Prefix: excluded, Kind: datapath.RouteVPC}
	hasIt := func(when string) {
		t.Helper()
		routes, err := n.b.dp.Routes()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(routes, want) {
			t.Errorf("%s: the routes map %v has no %v", when, routes, want)
		}
	}
	hasIt("after Open")
	n.in(t, n.node, "setting the VPC's blocks", func() error {
		return n.b.SetVPCCIDRs(context.Background(), []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")})
	})
	hasIt("after SetVPCCIDRs")
}
