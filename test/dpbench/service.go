package dpbench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
)

// ClusterIP is the Service the service rows reach. Its only backend is the VPC host's servers, elsewhere in
// the VPC: the node DNATs the pod's packets to it, as kube-proxy does, and un-DNATs the answers.
var ClusterIP = netip.MustParseAddr("10.100.0.10")

// The Service's ports, translated to the VPC host's (kube-proxy's port → targetPort).
const (
	serviceTCPPort = 80
	serviceUDPPort = 53
)

// Service reaches the VPC host's servers through ClusterIP.
var Service = Target{Name: "service", TCP: netip.AddrPortFrom(ClusterIP, serviceTCPPort), UDP: netip.AddrPortFrom(ClusterIP, serviceUDPPort)}

// serviceTable is the nftables table AddService writes into the node, shaped as kube-proxy's nftables mode
// writes a ClusterIP Service with one endpoint: a verdict map from ClusterIP, protocol and port to a
// per-Service chain, which jumps to the endpoint's DNAT chain. Nothing is masqueraded (the client is not
// the backend), as on EKS.
const serviceTable = "dpbench-kube-proxy"

func serviceRules() string {
	return fmt.Sprintf(`table ip %[1]s {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { %[2]s . tcp . %[3]d : goto service-tcp, %[2]s . udp . %[4]d : goto service-udp }
	}
	chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
	chain nat-output { type nat hook output priority -100; policy accept; jump services; }
	chain services { ip daddr . meta l4proto . th dport vmap @service-ips; }
	chain service-tcp { jump endpoint-tcp; }
	chain service-udp { jump endpoint-udp; }
	chain endpoint-tcp { meta l4proto tcp dnat to %[5]s; }
	chain endpoint-udp { meta l4proto udp dnat to %[6]s; }
}
`, serviceTable, ClusterIP, serviceTCPPort, serviceUDPPort, Direct.TCP, Direct.UDP)
}

// AddService programs the Service into t's node. Only the service measurements run with it: the table's
// NAT hooks turn on conntrack for the node's every packet, and the direct rows measure forwarding without
// it (RemoveService takes it away again).
func AddService(ctx context.Context, t *Topology) error {
	if err := run(ctx, strings.NewReader(serviceRules()), "ip", "netns", "exec", t.Node, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("adding the Service to %s: %w", t.Node, err)
	}
	return nil
}

// RemoveService deletes the Service's table from t's node and the conntrack entries of its flows. An entry
// outliving its table would still send a later direct flow that reuses the same ports through the host with
// eniwire (its conntrack lookup would find the stale entry's reply tuple), and the direct rows would
// measure the wrong path.
func RemoveService(ctx context.Context, t *Topology) error {
	if err := run(ctx, nil, "ip", "netns", "exec", t.Node, "nft", "delete", "table", "ip", serviceTable); err != nil {
		return fmt.Errorf("removing the Service from %s: %w", t.Node, err)
	}
	f := &netlink.ConntrackFilter{}
	if err := f.AddIP(netlink.ConntrackOrigDstIP, ClusterIP.AsSlice()); err != nil {
		return err
	}
	if _, err := t.node.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.FAMILY_V4, f); err != nil {
		return fmt.Errorf("deleting the Service's conntrack entries in %s: %w", t.Node, err)
	}
	return nil
}
