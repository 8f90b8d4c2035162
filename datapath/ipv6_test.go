package datapath

import (
	"net/netip"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// The IPv6 half of the test node: each IPv4 pod of putTestState also holds an address from the node's /80
// prefix, on the same veth and ENI, as in a VPC with IPv6 (pods on the primary ENI's prefix; the ENIs here
// are the IPv4 tests', whose entries name IPv4 gateways: IPv6 leaves by the kernel's next hop).
var (
	pod1v6, pod2v6 = addr("2600:1f14:e0:1:a::21"), addr("2600:1f14:e0:1:a::22")
	podGone6       = addr("2600:1f14:e0:1:a::24")
	nodeIP6        = addr("2600:1f14:e0:1::10")
	vpcPeer6       = addr("2600:1f14:e0:9::9")
	internet6      = addr("2001:db8::7")
	service6       = addr("fd00:10:96::a")
	podLinkLocal   = addr("fe80::21")
)

func testConfig6(snat bool) Config {
	c := testConfig(snat)
	c.VPCCIDRs = append(c.VPCCIDRs, prefix("2600:1f14:e0::/56"))
	c.NodeIPs = append(c.NodeIPs, nodeIP6)
	c.HostCIDRs = append(c.HostCIDRs, prefix("fd00:10:96::/112"))
	return c
}

func putTestState6(t *testing.T, d *Datapath) {
	t.Helper()
	putTestState(t, d)
	for _, p := range []struct {
		ip        netip.Addr
		veth, eni int
	}{{pod1v6, vethPod1, eniA}, {pod2v6, vethPod2, eniB}, {podGone6, vethGone, eniA}} {
		if err := d.PutPod(p.ip, p.veth, p.eni); err != nil {
			t.Fatalf("PutPod: %v", err)
		}
	}
}

func TestFromPodVerdictsOverIPv6(t *testing.T) {
	d := openTest(t, testConfig6(true))
	putTestState6(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"a pod on this node is reached with redirect_peer", fromPod, vethPod1, frame6(pod1v6, pod2v6, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer},
		{"a VPC address leaves by the pod's ENI", fromPod, vethPod2, frame6(pod2v6, vpcPeer6, protoUDP, 40002, 53), tcActRedirect, VerdictFromPodOutENI},
		{"the internet leaves by the pod's ENI untranslated, SNAT or not", fromPod, vethPod2, frame6(pod2v6, internet6, protoTCP, 40004, 443), tcActRedirect, VerdictFromPodOutENI},
		{"the node's own address goes to the host stack", fromPod, vethPod1, frame6(pod1v6, nodeIP6, protoTCP, 40001, 10250), tcActUnspec, VerdictFromPodToHost},
		{"a Service address goes to the host stack", fromPod, vethPod1, frame6(pod1v6, service6, protoUDP, 40003, 53), tcActUnspec, VerdictFromPodToHost},
		{"the link-local gateway goes to the host stack", fromPod, vethPod1, frame6(pod1v6, addr("fe80::1"), protoICMPv6, 7, 0), tcActUnspec, VerdictFromPodToHost},
		{"ICMPv6 echo follows its route", fromPod, vethPod2, frame6(pod2v6, vpcPeer6, protoICMPv6, 7, 0), tcActRedirect, VerdictFromPodOutENI},
		{"a pod sending with another pod's IPv6 address is dropped", fromPod, vethPod1, frame6(pod2v6, internet6, protoUDP, 1001, 53), tcActShot, VerdictFromPodSpoof},
		{"an unknown global source is dropped as spoofed", fromPod, vethPod1, frame6(addr("2600:1f14:e0:1:a::99"), vpcPeer6, protoUDP, 1000, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod's IPv6 address arriving on another device than its veth is dropped", fromPod, vethOther, frame6(pod1v6, pod2v6, protoTCP, 1002, 80), tcActShot, VerdictFromPodSpoof},
		{"a link-local source other than neighbour discovery is dropped", fromPod, vethPod1, frame6(podLinkLocal, addr("fe80::1"), protoUDP, 1003, 53), tcActShot, VerdictFromPodIPv6},
		{"a multicast listener report from the unspecified address is dropped as IPv6, not as a spoof", fromPod, vethPod1, icmp6(addr("::"), addr("ff02::16"), 143), tcActShot, VerdictFromPodIPv6},
		{"a link-local source towards a global address is dropped", fromPod, vethPod1, frame6(podLinkLocal, vpcPeer6, protoTCP, 1004, 443), tcActShot, VerdictFromPodIPv6},
		{"a neighbour solicitation from the pod's link-local address passes", fromPod, vethPod1, icmp6(podLinkLocal, addr("ff02::1:ff00:1"), icmpv6NeighborSolicit), tcActUnspec, VerdictFromPodNonIPv4},
		{"a neighbour advertisement from the pod's global address passes", fromPod, vethPod1, icmp6(pod1v6, addr("fe80::1"), icmpv6NeighborAdvert), tcActUnspec, VerdictFromPodNonIPv4},
		{"a router advertisement from the pod's own global address is dropped", fromPod, vethPod1, icmp6(pod1v6, addr("ff02::1"), icmpv6RouterAdvert), tcActShot, VerdictFromPodIPv6},
		{"an IPv6 EtherType whose header is not IPv6 is dropped as malformed", fromPod, vethPod1, withVersion(frame6(pod1v6, vpcPeer6, protoUDP, 1, 2), 4), tcActShot, VerdictFromPodMalformed},
		{"a pod whose veth has vanished is not reached, and that counts as a failed redirect", fromPod, vethPod1, frame6(pod1v6, podGone6, protoTCP, 40005, 80), tcActShot, VerdictRedirectFailed},
	})
}

// TestFromPodFollowsTheFlowOverIPv6: as over IPv4, a packet of a flow the host carries (conntrack has it,
// IPv6 tuple) goes to the host, and a router's cases (hop limit, MTU, hop-by-hop options) go there too.
func TestFromPodFollowsTheFlowOverIPv6(t *testing.T) {
	d := openTest(t, testConfig6(true))
	putTestState6(t, d)
	n := runNS(t, testVeths...)
	addConntrack(t, n,
		// pod1 asked the Service; the host DNAT'ed it to pod2 on this node.
		ctEntry{protoTCP, [2]netip.AddrPort{ap("[2600:1f14:e0:1:a::21]:40000"), ap("[fd00:10:96::a]:80")}, [2]netip.AddrPort{ap("[2600:1f14:e0:1:a::22]:8080"), ap("[2600:1f14:e0:1:a::21]:40000")}},
		ctEntry{protoUDP, [2]netip.AddrPort{ap("[2600:1f14:e0:1:a::21]:5353"), ap("[fd00:10:96::a]:53")}, [2]netip.AddrPort{ap("[2600:1f14:e0:1:a::22]:53"), ap("[2600:1f14:e0:1:a::21]:5353")}},
	)
	quotedDNS := frame6(pod1v6, pod2v6, protoUDP, 5353, 53) // what pod2 received, after the DNAT
	runCases(t, d, n, []progCase{
		{"a Service backend's reply to a pod of this node goes to the host to be un-DNATed", fromPod, vethPod2, frame6(pod2v6, pod1v6, protoTCP, 8080, 40000), tcActUnspec, VerdictFromPodHostFlow},
		{"a UDP Service backend's reply goes to the host", fromPod, vethPod2, frame6(pod2v6, pod1v6, protoUDP, 53, 5353), tcActUnspec, VerdictFromPodHostFlow},
		{"a reply on another port pair is redirected into the pod", fromPod, vethPod2, frame6(pod2v6, pod1v6, protoTCP, 8080, 40001), tcActRedirect, VerdictFromPodToPeer},
		{"a port unreachable about a host-carried flow goes to the host, matched on its inner header", fromPod, vethPod2, icmp6Error(pod2v6, pod1v6, icmpv6DestUnreac, 4, quotedDNS), tcActUnspec, VerdictFromPodHostFlow},
		{"a port unreachable about a fast-path flow stays on the fast path", fromPod, vethPod2, icmp6Error(pod2v6, vpcPeer6, icmpv6DestUnreac, 4, frame6(vpcPeer6, pod2v6, protoUDP, 999, 53)), tcActRedirect, VerdictFromPodOutENI},
		{"a hop-by-hop options header goes to the host whatever its flow", fromPod, vethPod2, withExtension(frame6(pod2v6, vpcPeer6, protoTCP, 8080, 41001), nextHopByHop, false, 0), tcActUnspec, VerdictFromPodIPv6Header},
		{"a first fragment goes to the host, which reassembles", fromPod, vethPod2, withExtension(frame6(pod2v6, vpcPeer6, protoUDP, 7000, 7000), nextFragment, true, 0), tcActUnspec, VerdictFromPodHostFlow},
		{"a later fragment goes to the host with the first", fromPod, vethPod2, withExtension(frame6(pod2v6, vpcPeer6, protoUDP, 7000, 7000), nextFragment, false, 185), tcActUnspec, VerdictFromPodHostFlow},
		{"a packet with hop limit 1 goes to the host, which answers time exceeded", fromPod, vethPod2, withHopLimit(frame6(pod2v6, vpcPeer6, protoUDP, 33434, 33434), 1), tcActUnspec, VerdictFromPodTTL},
		{"a packet with hop limit 1 to a pod of this node goes to the host", fromPod, vethPod2, withHopLimit(frame6(pod2v6, pod1v6, protoUDP, 33434, 33434), 1), tcActUnspec, VerdictFromPodTTL},
		{"a packet larger than the ENI's MTU goes to the host, which answers Packet Too Big", fromPod, vethPod2, padded6(frame6(pod2v6, vpcPeer6, protoUDP, 7001, 7001), 1600), tcActUnspec, VerdictFromPodTooBig},
		{"a packet of the ENI's MTU leaves by it", fromPod, vethPod2, padded6(frame6(pod2v6, vpcPeer6, protoUDP, 7001, 7001), 1514), tcActRedirect, VerdictFromPodOutENI},
	})

	t.Run("a forwarded packet leaves with its hop limit decremented", func(t *testing.T) {
		in := frame6(pod2v6, vpcPeer6, protoUDP, 7002, 7002)
		out := runOut(t, n, d.objs.EniwFromPod, vethPod2, in)
		if hops := out[ethLen+7]; hops != 63 {
			t.Errorf("hop limit = %d, want 63", hops)
		}
		if string(out[ethLen+8:]) != string(in[ethLen+8:]) {
			t.Errorf("the packet changed beyond its hop limit")
		}
	})
}

func TestToPodVerdictsOverIPv6(t *testing.T) {
	d := openTest(t, testConfig6(true))
	putTestState6(t, d)
	n := runNS(t, testVeths...)
	addConntrack(t, n,
		// pod1 asked a Service; the host DNAT'ed it to a backend elsewhere in the VPC.
		ctEntry{protoTCP, [2]netip.AddrPort{ap("[2600:1f14:e0:1:a::21]:40010"), ap("[fd00:10:96::a]:443")}, [2]netip.AddrPort{ap("[2600:1f14:e0:9::20]:8443"), ap("[2600:1f14:e0:1:a::21]:40010")}},
	)
	runCases(t, d, n, []progCase{
		{"a VPC host reaches a pod with redirect_peer", toPod, 0, frame6(vpcPeer6, pod1v6, protoTCP, 443, 40000), tcActRedirect, VerdictToPodToPeer},
		{"the internet reaches a pod directly, SNAT or not (IPv6 is never translated)", toPod, 0, frame6(internet6, pod1v6, protoTCP, 443, 40000), tcActRedirect, VerdictToPodToPeer},
		{"a Service backend's reply goes to the host to be un-DNATed", toPod, 0, frame6(addr("2600:1f14:e0:9::20"), pod1v6, protoTCP, 8443, 40010), tcActUnspec, VerdictToPodHostFlow},
		{"a packet from a pod of this node is dropped as forged", toPod, 0, frame6(pod2v6, pod1v6, protoTCP, 40000, 80), tcActShot, VerdictToPodSpoof},
		{"a packet from the node's own address goes to the host", toPod, 0, frame6(nodeIP6, pod1v6, protoTCP, 40000, 80), tcActUnspec, VerdictToPodHostSource},
		{"a packet with hop limit 1 goes to the host, which answers time exceeded", toPod, 0, withHopLimit(frame6(vpcPeer6, pod1v6, protoUDP, 33434, 33434), 1), tcActUnspec, VerdictToPodTTL},
		{"a packet larger than the pod veth's MTU goes to the host, which answers Packet Too Big", toPod, 0, padded6(frame6(vpcPeer6, pod1v6, protoUDP, 7001, 7001), 1600), tcActUnspec, VerdictToPodTooBig},
		{"a hop-by-hop options header goes to the host", toPod, 0, withExtension(frame6(vpcPeer6, pod1v6, protoUDP, 7000, 7000), nextHopByHop, false, 0), tcActUnspec, VerdictToPodIPv6Header},
		{"a neighbour solicitation for a pod's address is the host's to answer", toPod, 0, icmp6(addr("fe80::1"), pod1v6, icmpv6NeighborSolicit), tcActUnspec, VerdictToPodPass},
		{"an address that is no pod's goes to the host", toPod, 0, frame6(vpcPeer6, nodeIP6, protoTCP, 443, 40000), tcActUnspec, VerdictToPodPass},
	})
}

func TestToVPCVerdictsOverIPv6(t *testing.T) {
	d := openTest(t, testConfig6(true))
	putTestState6(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		// The test runs arrive on loopback, ENI A: pod2 holds ENI B.
		{"a pod's packet routed out of another ENI is moved to its own", toVPC, eniA, frame6(pod2v6, vpcPeer6, protoTCP, 40000, 443), tcActRedirect, VerdictToVPCRerouted},
		{"a pod's packet on its own ENI leaves as routed", toVPC, eniA, frame6(pod1v6, vpcPeer6, protoTCP, 40000, 443), tcActUnspec, VerdictToVPCPass},
		{"the node's own packet leaves as routed", toVPC, eniA, frame6(nodeIP6, vpcPeer6, protoTCP, 40000, 443), tcActUnspec, VerdictToVPCPass},
	})
}

// TestPolicyVerdictsOverIPv6: the NetworkPolicy judgement is the IPv4 one on 16-byte addresses: an IPv6
// pod's entry carries its own policy flags, its peers are IPv6 prefixes, and the flows it opens on the fast
// path get eniwire's conntrack entries with IPv6 tuples, so their replies pass.
func TestPolicyVerdictsOverIPv6(t *testing.T) {
	d := openTest(t, testConfig6(true))
	putTestState6(t, d)
	n := runNS(t, testVeths...)
	setPolicy(t, d, pod2v6, dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
		{Peer: prefix("2600:1f14:e0:1:a::21/128"), Ports: []dptypes.PortRange{tcp(80, 80)}},
		{Peer: prefix("2600:1f14:e0:9::/64"), Ports: []dptypes.PortRange{udp(53, 53)}},
	}})
	setPolicy(t, d, pod1v6, dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{
		{Peer: prefix("2600:1f14:e0:1:a::/80"), Ports: []dptypes.PortRange{tcp(80, 80)}},
	}})
	counterMoves(t, d, VerdictFromPodEgressAllowed, 1, func() {
		counterMoves(t, d, VerdictFromPodIngressAllowed, 1, func() {
			runCases(t, d, n, []progCase{{"a flow both policies allow opens", fromPod, vethPod1, frame6(pod1v6, pod2v6, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer}})
		})
	})
	runCases(t, d, n, []progCase{
		{"its reply passes on the flow's entry", fromPod, vethPod2, frame6(pod2v6, pod1v6, protoTCP, 80, 40000), tcActRedirect, VerdictFromPodToPeer},
		{"another port is denied by the opener's egress", fromPod, vethPod1, frame6(pod1v6, pod2v6, protoTCP, 40001, 81), tcActShot, VerdictFromPodEgressDenied},
		{"a peer outside the egress rule's prefix is denied", fromPod, vethPod1, frame6(pod1v6, vpcPeer6, protoTCP, 40002, 80), tcActShot, VerdictFromPodEgressDenied},
		{"a VPC host the ingress rule names opens a UDP flow", toPod, 0, frame6(vpcPeer6, pod2v6, protoUDP, 5353, 53), tcActRedirect, VerdictToPodToPeer},
		{"a port the ingress rules do not name is denied", toPod, 0, frame6(vpcPeer6, pod2v6, protoTCP, 41000, 22), tcActShot, VerdictToPodIngressDenied},
		{"ICMPv6 of an isolated pod goes to the host, whose conntrack ties it to a flow (eniw_forward judges it)", toPod, 0, frame6(vpcPeer6, pod2v6, protoICMPv6, 7, 0), tcActUnspec, VerdictToPodHostFlow},
		{"the pod's IPv4 address, which no policy selects, is not isolated by its IPv6 one's", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 40003, 443), tcActRedirect, VerdictFromPodOutENI},
	})
}

// TestForwardVerdictsOverIPv6: eniw_forward judges the IPv6 flows the host carries as it judges IPv4's, at
// the IPv6 FORWARD hook.
func TestForwardVerdictsOverIPv6(t *testing.T) {
	d := openTest(t, testConfig6(true))
	putTestState6(t, d)
	setPolicy(t, d, pod1v6, dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{
		{Peer: prefix("2600:1f14:e0:1:a::/80"), Ports: []dptypes.PortRange{tcp(80, 80)}},
	}})
	setPolicy(t, d, pod2v6, dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
		{Peer: prefix("2600:1f14:e0:1:a::21/128"), Ports: []dptypes.PortRange{tcp(80, 80)}},
	}})
	runForwardCases(t, d, nfProtoIPv6, []forwardCase{
		{"pod1 to pod2 after a Service's DNAT, on a port both allow", frame6(pod1v6, pod2v6, protoTCP, 40000, 80), nfAccept, VerdictForwardEgressAllowed},
		{"pod1 to the internet: its egress denies it", frame6(pod1v6, internet6, protoTCP, 40000, 443), nfDrop, VerdictForwardEgressDenied},
		{"a VPC client to pod2 through a NodePort: its ingress denies it", frame6(vpcPeer6, pod2v6, protoTCP, 999, 80), nfDrop, VerdictForwardIngressDenied},
		{"ICMPv6 to pod2 of no flow the host knows, from the VPC its ingress does not name", frame6(vpcPeer6, pod2v6, protoICMPv6, 7, 0), nfDrop, VerdictForwardIngressDenied},
		{"ICMPv6 of pod1's of no flow the host knows, to the internet its egress denies", frame6(pod1v6, internet6, protoICMPv6, 7, 0), nfDrop, VerdictForwardEgressDenied},
	})
}
