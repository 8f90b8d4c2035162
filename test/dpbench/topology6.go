package dpbench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// The IPv6 half of the topology NewIPv6Topology builds, laid out as a VPC with IPv6 and a node in eniwire's
// IPv6 mode (ENABLE_IPv6): the pod takes an address of the node's /80 prefix on the primary ENI, the node
// holds an address of the subnet's /64 on eth0 and its IPv6 default route through the VPC router, and the
// router routes the /80 to the node's eth0. The IPv4 half stays as NewTopology builds it.
//
//	pod 2600:1f14:e0:1:a::21 -- host0 [node] eth0 2600:1f14:e0:1::10 -- vpc0 2600:1f14:e0:1::1 [router] vpch 2600:1f14:e0:9::1 -- 2600:1f14:e0:9::9 [vpchost]
//
// The pod's gateway is eniwire's CNI plumbing for IPv6 (datapath/doc.go, IPv6): its /128 on eth0, a default
// route via fe80::1 and a permanent neighbour entry fe80::1 → the host veth's MAC.
var (
	PodIP6      = netip.MustParseAddr("2600:1f14:e0:1:a::21")
	VPCHostIP6  = netip.MustParseAddr("2600:1f14:e0:9::9")
	podPrefix6  = netip.MustParsePrefix("2600:1f14:e0:1:a::/80")
	primaryIP6  = netip.MustParseAddr("2600:1f14:e0:1::10")
	primaryGW6  = netip.MustParseAddr("2600:1f14:e0:1::1")
	vpcHostGW6  = netip.MustParseAddr("2600:1f14:e0:9::1")
	podGateway6 = netip.MustParseAddr("fe80::1")
)

// ipv6Sysctls keep IPv6 on in every namespace of the IPv6 topology, with no duplicate address detection:
// the host veth's link-local address, which resolves the pod, must be usable as soon as the link is up.
var ipv6Sysctls = map[string]string{
	"net/ipv6/conf/all/disable_ipv6": "0", "net/ipv6/conf/default/disable_ipv6": "0",
	"net/ipv6/conf/all/accept_dad": "0", "net/ipv6/conf/default/accept_dad": "0",
}

// NewIPv6Topology builds NewTopology's namespaces and links with IPv6 on, and the addresses and routes
// above. Its servers listen on VPCHostIP6; Direct6 reaches them.
func NewIPv6Topology(ctx context.Context, prefix string) (*Topology, error) {
	return newTopology(ctx, prefix, true)
}

// addIPv6 gives the built IPv4 topology its IPv6 half; hostMAC is the host veth's.
func (t *Topology) addIPv6(ctx context.Context, hostMAC net.HardwareAddr) error {
	forwarding := map[string]string{"net/ipv6/conf/all/forwarding": "1"}
	for _, name := range []string{t.Node, t.Router} {
		if err := t.sysctls(name, forwarding); err != nil {
			return err
		}
	}
	steps := []struct{ ns, script string }{
		{t.Node, fmt.Sprintf(`addr add %s/64 dev %s nodad
route add ::/0 via %s dev %s
route add %s/128 dev %s
`, primaryIP6, PrimaryENI, primaryGW6, PrimaryENI, PodIP6, PodVeth)},
		{t.Router, fmt.Sprintf(`addr add %s/64 dev vpc0 nodad
addr add %s/64 dev vpch nodad
route add %s via %s dev vpc0
`, primaryGW6, vpcHostGW6, podPrefix6, primaryIP6)},
		{t.VPCHost, fmt.Sprintf(`addr add %s/64 dev eth0 nodad
route add ::/0 via %s dev eth0
`, VPCHostIP6, vpcHostGW6)},
		{t.Pod, fmt.Sprintf(`addr add %s/128 dev eth0 nodad
neigh add %s lladdr %s dev eth0 nud permanent
route add ::/0 via %s dev eth0
`, PodIP6, podGateway6, hostMAC, podGateway6)},
	}
	for _, s := range steps {
		if err := t.IPBatch(ctx, s.ns, s.script); err != nil {
			return err
		}
	}
	return nil
}

// serverIP is the VPC host address the servers listen on: VPCHostIP6 in the IPv6 topology.
func (t *Topology) serverIP() netip.Addr {
	if t.IPv6 {
		return VPCHostIP6
	}
	return VPCHostIP
}
