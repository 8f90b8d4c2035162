package datapath

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/snat"
)

// TestIPv4EgressOfAnIPv6PodLeavesFromTheNodesAddress: real BPF on the node in network namespaces. pod1 holds
// an IPv4 egress address as an IPv6 pod does (on its lo, the source of its IPv4 default route), which the
// node knows as a pods entry of pod1's veth without an ENI, routes to that veth, and translates with the
// SNAT table's egress rule. A datagram from it to the VPC host goes to the host (from_pod), leaves the ENI
// from the node's address, and the answer comes back into the pod; one from pod2's egress address is dropped
// as spoofed; under an egress policy of the address's, the FORWARD hook judges it.
func TestIPv4EgressOfAnIPv6PodLeavesFromTheNodesAddress(t *testing.T) {
	f := newFabric(t)
	d := f.startWithPolicy(t, AttachAuto)
	egress1, egress2 := addr("169.254.172.1"), addr("169.254.172.2")
	nodeIP := addr("10.77.1.10")
	f.nodeDo(t, "giving pod1 and pod2 egress addresses", func() error {
		for ip, veth := range map[netip.Addr]int{egress1: f.host1, egress2: f.host2} {
			if err := d.PutPod(ip, veth, 0); err != nil {
				return err
			}
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: veth, Dst: hostNet(ip), Scope: netlink.SCOPE_LINK}); err != nil {
				return err
			}
		}
		// The host's own way to the VPC host: out of eni1, as a node's primary ENI leads to its subnet's router.
		if err := netlink.RouteAdd(&netlink.Route{Dst: hostNet(vpcHost), Gw: gw1.AsSlice(), LinkIndex: f.eni1}); err != nil {
			return err
		}
		m, err := snat.New(context.Background(), snat.Config{PrimaryIP: nodeIP, PrimaryInterface: "eni1",
			EgressCIDR: dptypes.IPv4EgressRange, External: true, Backend: snat.BackendNFTables, Logger: testLogger(t)})
		if err != nil {
			return err
		}
		return m.Apply(context.Background())
	})
	if err := f.pod1.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for _, ip := range []netip.Addr{egress1, egress2} { // egress2 only to forge it
			if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: hostNet(ip)}); err != nil {
				return err
			}
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatal(err)
	}
	// The VPC host echoes, and reports every source it saw.
	at := netip.AddrPortFrom(vpcHost, 7100)
	conn := listenUDP(t, f.vpc, at)
	seen := make(chan netip.Addr, 64)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			seen <- from.(*net.UDPAddr).AddrPort().Addr().Unmap()
			_, _ = conn.WriteTo(buf[:n], from)
		}
	}()

	t.Run("from the egress address: to the host, out from the node's address, and the answer back in", func(t *testing.T) {
		toHost := counterNow(t, d.Reader, VerdictFromPodToHost)
		if err := udpExchange(f.pod1, egress1, at, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodToHost, toHost+1)
		if src := <-seen; src != nodeIP {
			t.Fatalf("the VPC host saw the datagram from %s, want the node's %s", src, nodeIP)
		}
	})
	t.Run("from another pod's egress address: dropped as spoofed", func(t *testing.T) {
		spoofed := counterNow(t, d.Reader, VerdictFromPodSpoof)
		if err := udpExchange(f.pod1, egress2, at, time.Second); err == nil {
			t.Fatal("the VPC host answered pod1 sending from pod2's egress address")
		}
		waitCounter(t, d.Reader, VerdictFromPodSpoof, spoofed+1)
	})
	t.Run("under an egress policy that allows another peer only: dropped where the host forwards it", func(t *testing.T) {
		// The agent gives the egress address the pod's flags (nodenet's egressPolicies); the FORWARD hook
		// judges the flow on its untranslated source, before the SNAT rule.
		anyPort := []dptypes.PortRange{{Protocol: dptypes.AnyProtocol}}
		other := dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{{Peer: netip.MustParsePrefix("192.0.2.0/24"), Ports: anyPort}}}
		if err := d.SetPodPolicy(context.Background(), egress1, other); err != nil {
			t.Fatal(err)
		}
		denied := counterNow(t, d.Reader, VerdictForwardEgressDenied)
		if err := udpExchange(f.pod1, egress1, at, time.Second); err == nil {
			t.Fatal("the VPC host answered the egress address of a pod whose policy allows it no such peer")
		}
		waitCounter(t, d.Reader, VerdictForwardEgressDenied, denied+1)
		allowed := other
		allowed.Egress = append(allowed.Egress, dptypes.PeerPorts{Peer: netip.PrefixFrom(vpcHost, 32), Ports: anyPort})
		if err := d.SetPodPolicy(context.Background(), egress1, allowed); err != nil {
			t.Fatal(err)
		}
		if err := udpExchange(f.pod1, egress1, at, 5*time.Second); err != nil {
			t.Fatalf("allowed to the VPC host, the egress address still gets no answer: %v", err)
		}
	})
}
