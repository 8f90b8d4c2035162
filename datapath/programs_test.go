package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/bpf"
)

// tc return codes (linux/pkt_cls.h). A program passes a packet on with TC_ACT_UNSPEC (-1, tcx "next"),
// which BPF_PROG_TEST_RUN reports as its 32-bit pattern.
const (
	tcActUnspec   = 0xffffffff
	tcActShot     = 2
	tcActRedirect = 7
)

// Ifindexes in the maps need not exist for BPF_PROG_TEST_RUN, except the one a packet arrives on
// (skb->ifindex) and the one it is redirected to (the programs check the target exists and its MTU):
// loopback (1) by default, or a device of the caller's netns. So the pods' host veths and ENI B are veths
// at these ifindexes in a namespace of the test's own (runNS).
const (
	loIfindex   = 1
	eniA        = 1 // "this" ENI in to_vpc cases: the loopback the test run arrives on
	eniB        = 41
	vethPod1    = 51
	vethPod2    = 52
	vethPodNoEN = 53
	vethOther   = 54 // a veth with no pod behind it
	vethGone    = 77 // the veth of a pod whose interface has vanished: no device
)

var testVeths = []int{eniB, vethPod1, vethPod2, vethPodNoEN, vethOther}

func putTestState(t *testing.T, d *Datapath) {
	t.Helper()
	mac := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 1}
	for _, e := range []struct {
		ifindex int
		gw      string
		subnet  string
	}{{eniA, "10.0.1.1", "10.0.1.0/24"}, {eniB, "10.0.2.1", "10.0.2.0/24"}} {
		// Writing the entry is what matters here; attaching to loopback and a missing ifindex is not.
		gk, _ := addrKey(addr(e.gw))
		sk, _ := routeKey(prefix(e.subnet))
		v := bpf.EniwireEniValue{Gateway: gk, Subnet: sk.Dst, SubnetPrefixlen: uint8(sk.Prefixlen), Family: 2}
		copy(v.Mac[:], mac)
		if err := d.objs.Enis.Put(uint32(e.ifindex), v); err != nil {
			t.Fatalf("putting ENI: %v", err)
		}
	}
	for _, p := range []struct {
		ip        string
		veth, eni int
	}{{"10.0.1.21", vethPod1, eniA}, {"10.0.2.22", vethPod2, eniB}, {"10.0.3.23", vethPodNoEN, 99}, {"10.0.1.24", vethGone, eniA}} {
		if err := d.PutPod(addr(p.ip), p.veth, p.eni); err != nil {
			t.Fatalf("PutPod: %v", err)
		}
	}
}

func testConfig(snat bool) Config {
	return Config{
		VPCCIDRs:  []netip.Prefix{prefix("10.0.0.0/16")},
		NodeIPs:   []netip.Addr{addr("10.0.1.10")},
		HostCIDRs: []netip.Prefix{prefix("10.0.200.0/24")},
		SNAT:      snat,
	}
}

type progCase struct {
	name    string
	prog    func(d *Datapath) *ebpf.Program
	on      int // the ifindex the packet arrives on; 0 is loopback
	pkt     []byte
	want    uint32
	verdict Verdict
}

// runOn runs prog on pkt as if it arrived on device ifindex (0: loopback) of netns n.
func runOn(n ns.NetNS, prog *ebpf.Program, ifindex int, pkt []byte) (ret uint32, err error) {
	opts := &ebpf.RunOptions{Data: pkt}
	if ifindex != 0 {
		opts.Context = ArrivingOn(ifindex)
	}
	err = n.Do(func(ns.NetNS) error {
		ret, err = prog.Run(opts)
		return err
	})
	return ret, err
}

func runCases(t *testing.T, d *Datapath, n ns.NetNS, cases []progCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := d.Counter(c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			ret, err := runOn(n, c.prog(d), c.on, c.pkt)
			if err != nil {
				t.Fatalf("running program: %v", err)
			}
			if ret != c.want {
				t.Errorf("program returned %d, want %d", ret, c.want)
			}
			after, err := d.Counter(c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			if after.Packets != before.Packets+1 {
				t.Errorf("counter %s/%s moved from %d to %d packets, want +1", c.verdict.Program(), c.verdict, before.Packets, after.Packets)
			}
			if after.Bytes <= before.Bytes {
				t.Errorf("counter %s bytes did not grow (%d -> %d)", c.verdict, before.Bytes, after.Bytes)
			}
		})
	}
}

func fromPod(d *Datapath) *ebpf.Program { return d.objs.EniwFromPod }
func toPod(d *Datapath) *ebpf.Program   { return d.objs.EniwToPod }
func toVPC(d *Datapath) *ebpf.Program   { return d.objs.EniwToVpc }

var (
	pod1, pod2 = addr("10.0.1.21"), addr("10.0.2.22")
	podGone    = addr("10.0.1.24")
	vpcPeer    = addr("10.0.9.9")
	nodeIP     = addr("10.0.1.10")
)

func TestFromPodVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"ARP passes on to the host", fromPod, vethPod1, arpFrame(), tcActUnspec, VerdictFromPodNonIPv4},
		{"IPv6 neighbour discovery passes on to the host", fromPod, vethPod1, ipv6Frame(nextICMPv6, icmpv6NeighborSolicit), tcActUnspec, VerdictFromPodNonIPv4},
		{"other IPv6 is dropped", fromPod, vethPod1, ipv6Frame(nextUDP, 0), tcActShot, VerdictFromPodIPv6},
		{"an IPv4 header shorter than 20 bytes is dropped as malformed", fromPod, vethPod1, badHeaderFrame(pod1, vpcPeer), tcActShot, VerdictFromPodMalformed},
		{"a packet cut inside its L4 header is still routed by address", fromPod, vethPod1, cutFrame(pod1, vpcPeer), tcActRedirect, VerdictFromPodOutENI},
		{"an unknown source is dropped as spoofed", fromPod, vethPod1, frame(addr("10.0.1.99"), vpcPeer, protoUDP, 1000, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod sending with another pod's address is dropped", fromPod, vethPod1, frame(pod2, addr("192.0.2.7"), protoUDP, 1001, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod's address sent from a veth with no pod is dropped", fromPod, vethOther, frame(pod1, pod2, protoTCP, 1002, 80), tcActShot, VerdictFromPodSpoof},
		{"a pod's address arriving on another device than its veth is dropped", fromPod, 0, frame(pod1, vpcPeer, protoUDP, 1003, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod on this node is reached with redirect_peer", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer},
		{"the node's own address goes to the host stack", fromPod, vethPod1, frame(pod1, nodeIP, protoTCP, 40001, 10250), tcActUnspec, VerdictFromPodToHost},
		{"a VPC address leaves by the pod's ENI", fromPod, vethPod2, frame(pod2, vpcPeer, protoUDP, 40002, 53), tcActRedirect, VerdictFromPodOutENI},
		{"a host CIDR inside the VPC goes to the host stack", fromPod, vethPod1, frame(pod1, addr("10.0.200.10"), protoUDP, 40003, 53), tcActUnspec, VerdictFromPodToHost},
		{"the internet goes to the host stack to be masqueraded", fromPod, vethPod1, frame(pod1, addr("192.0.2.7"), protoTCP, 40004, 443), tcActUnspec, VerdictFromPodToHost},
		{"a pod whose ENI has no entry passes to the host", fromPod, vethPodNoEN, frame(addr("10.0.3.23"), vpcPeer, protoICMP, 7, 0), tcActUnspec, VerdictFromPodNoENI},
		{"a pod whose veth has vanished is not reached, and that counts as a failed redirect", fromPod, vethPod1, frame(pod1, podGone, protoTCP, 40005, 80), tcActShot, VerdictRedirectFailed},
	})

	t.Run("per-pod traffic counts what the pod sent and received", func(t *testing.T) {
		traffic, err := d.PodTraffic()
		if err != nil {
			t.Fatal(err)
		}
		got := map[netip.Addr]PodTraffic{}
		for _, p := range traffic {
			got[p.IP] = p
		}
		// Spoofed packets count for no pod: neither the claimed sender nor the real one.
		if p := got[pod1]; p.TxPackets != 6 || p.RxPackets != 0 {
			t.Errorf("pod1 traffic = %+v, want 6 sent, 0 received", p)
		}
		if p := got[pod2]; p.TxPackets != 1 || p.RxPackets != 1 {
			t.Errorf("pod2 traffic = %+v, want 1 sent, 1 received", p)
		}
	})
}

// TestFromPodFollowsTheFlow: a pod's packet that its route would put on a fast path goes to the host when
// its flow is the host's (conntrack has it), and stays on the fast path otherwise.
func TestFromPodFollowsTheFlow(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	addConntrack(t, n,
		// pod1 asked the Service; the host DNAT'ed it to pod2 on this node.
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.1.21:40000"), ap("10.0.200.10:80")}, [2]netip.AddrPort{ap("10.0.2.22:8080"), ap("10.0.1.21:40000")}},
		ctEntry{protoUDP, [2]netip.AddrPort{ap("10.0.1.21:5353"), ap("10.0.200.10:53")}, [2]netip.AddrPort{ap("10.0.2.22:53"), ap("10.0.1.21:5353")}},
		// A VPC client reached pod2 through the node's NodePort (externalTrafficPolicy: Local: no SNAT).
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.9.9:41000"), ap("10.0.1.10:30080")}, [2]netip.AddrPort{ap("10.0.2.22:8080"), ap("10.0.9.9:41000")}},
		// The node probes pod2's port 8080 (kubelet).
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.1.10:50000"), ap("10.0.2.22:8080")}, [2]netip.AddrPort{ap("10.0.2.22:8080"), ap("10.0.1.10:50000")}},
	)
	quotedDNS := frame(pod1, pod2, protoUDP, 5353, 53) // what pod2 received, after the DNAT
	runCases(t, d, n, []progCase{
		{"a Service backend's reply to a pod of this node goes to the host to be un-DNATed", fromPod, vethPod2, frame(pod2, pod1, protoTCP, 8080, 40000), tcActUnspec, VerdictFromPodHostFlow},
		{"a UDP Service backend's reply to a pod of this node goes to the host", fromPod, vethPod2, frame(pod2, pod1, protoUDP, 53, 5353), tcActUnspec, VerdictFromPodHostFlow},
		{"a NodePort (Local) backend's reply to a VPC client goes to the host, not out of the ENI", fromPod, vethPod2, frame(pod2, vpcPeer, protoTCP, 8080, 41000), tcActUnspec, VerdictFromPodHostFlow},
		{"a reply from a probed port to another VPC client leaves by the ENI", fromPod, vethPod2, frame(pod2, vpcPeer, protoTCP, 8080, 41001), tcActRedirect, VerdictFromPodOutENI},
		{"a reply to a pod of this node on another port pair is redirected into it", fromPod, vethPod2, frame(pod2, pod1, protoTCP, 8080, 40001), tcActRedirect, VerdictFromPodToPeer},
		{"the same ports over another protocol stay on the fast path", fromPod, vethPod2, frame(pod2, pod1, protoUDP, 8080, 40000), tcActRedirect, VerdictFromPodToPeer},
		{"a port unreachable about a host-carried flow goes to the host, which translates it", fromPod, vethPod2, icmpError(pod2, pod1, icmpDestUnreachable, codePortUnreachable, quotedDNS), tcActUnspec, VerdictFromPodHostFlow},
		{"a port unreachable about a fast-path flow stays on the fast path", fromPod, vethPod2, icmpError(pod2, vpcPeer, icmpDestUnreachable, codePortUnreachable, frame(vpcPeer, pod2, protoUDP, 999, 53)), tcActRedirect, VerdictFromPodOutENI},
		{"a packet with IPv4 options, even no-ops, goes to the host whatever its flow", fromPod, vethPod2, withOptions(frame(pod2, vpcPeer, protoTCP, 8080, 41001), 2), tcActUnspec, VerdictFromPodIPHeader},
		{"a first fragment goes to the host, which reassembles", fromPod, vethPod2, asFragment(frame(pod2, vpcPeer, protoUDP, 7000, 7000), true, 0), tcActUnspec, VerdictFromPodHostFlow},
		{"a later fragment goes to the host with the first", fromPod, vethPod2, asFragment(frame(pod2, vpcPeer, protoUDP, 7000, 7000), false, 185), tcActUnspec, VerdictFromPodHostFlow},
		{"a protocol conntrack cannot be asked about goes to the host", fromPod, vethPod2, frame(pod2, vpcPeer, protoSCTP, 7000, 7000), tcActUnspec, VerdictFromPodHostFlow},
		{"ICMP echo follows its route", fromPod, vethPod2, frame(pod2, vpcPeer, protoICMP, 7, 0), tcActRedirect, VerdictFromPodOutENI},
		{"a packet that would expire goes to the host, which answers time exceeded", fromPod, vethPod2, withTTL(frame(pod2, vpcPeer, protoUDP, 33434, 33434), 1), tcActUnspec, VerdictFromPodTTL},
		{"a packet that would expire on the way to a pod of this node goes to the host", fromPod, vethPod2, withTTL(frame(pod2, pod1, protoUDP, 33434, 33434), 1), tcActUnspec, VerdictFromPodTTL},
		{"a packet larger than the ENI's MTU goes to the host, which fragments or answers", fromPod, vethPod2, padded(frame(pod2, vpcPeer, protoUDP, 7001, 7001), 1600), tcActUnspec, VerdictFromPodTooBig},
		{"a packet of the ENI's MTU leaves by it", fromPod, vethPod2, padded(frame(pod2, vpcPeer, protoUDP, 7001, 7001), 1514), tcActRedirect, VerdictFromPodOutENI},
	})

	t.Run("a forwarded packet leaves with its TTL decremented and its checksum valid", func(t *testing.T) {
		out := runOut(t, n, d.objs.EniwFromPod, vethPod2, frame(pod2, vpcPeer, protoUDP, 7002, 7002))
		if ttl := out[ethLen+8]; ttl != 63 {
			t.Errorf("TTL = %d, want 63", ttl)
		}
		if !ipChecksumValid(out) {
			t.Errorf("IPv4 header checksum is wrong after the TTL decrement")
		}
	})
}

func TestFromPodWithoutSNAT(t *testing.T) {
	d := openTest(t, testConfig(false))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"the internet leaves by the pod's ENI", fromPod, vethPod1, frame(pod1, addr("192.0.2.7"), protoTCP, 40004, 443), tcActRedirect, VerdictFromPodOutENI},
		{"a host CIDR still goes to the host stack", fromPod, vethPod1, frame(pod1, addr("10.0.200.10"), protoUDP, 40003, 53), tcActUnspec, VerdictFromPodToHost},
		{"the node's own address still goes to the host stack", fromPod, vethPod1, frame(pod1, nodeIP, protoTCP, 40001, 10250), tcActUnspec, VerdictFromPodToHost},
		{"a pod sending with another pod's address is still dropped", fromPod, vethPod1, frame(pod2, addr("192.0.2.7"), protoTCP, 40005, 443), tcActShot, VerdictFromPodSpoof},
		{"NodeLocal DNSCache's link-local address goes to the host stack", fromPod, vethPod1, frame(pod1, addr("169.254.20.10"), protoUDP, 40006, 53), tcActUnspec, VerdictFromPodToHost},
		{"IMDS goes to the host stack, whose FORWARD rules apply", fromPod, vethPod1, frame(pod1, addr("169.254.169.254"), protoTCP, 40007, 80), tcActUnspec, VerdictFromPodToHost},
		{"the EKS Pod Identity agent goes to the host stack", fromPod, vethPod1, frame(pod1, addr("169.254.170.23"), protoTCP, 40008, 80), tcActUnspec, VerdictFromPodToHost},
	})
	t.Run("an address the node gains later goes to the host stack", func(t *testing.T) {
		dummy := addr("172.20.0.10") // say, on a dummy interface
		if err := d.SetNodeIPs([]netip.Addr{nodeIP, dummy}); err != nil {
			t.Fatal(err)
		}
		runCases(t, d, n, []progCase{
			{"to the new address", fromPod, vethPod1, frame(pod1, dummy, protoUDP, 40009, 53), tcActUnspec, VerdictFromPodToHost},
			{"to the address it had", fromPod, vethPod1, frame(pod1, nodeIP, protoUDP, 40009, 53), tcActUnspec, VerdictFromPodToHost},
		})
	})
}

func TestToPodVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	remote := addr("10.0.9.20") // a Service backend elsewhere in the VPC
	addConntrack(t, n,
		// pod1 asked a Service; the host DNAT'ed it to a backend elsewhere in the VPC.
		ctEntry{protoUDP, [2]netip.AddrPort{ap("10.0.1.21:5353"), ap("10.0.200.10:53")}, [2]netip.AddrPort{ap("10.0.9.20:53"), ap("10.0.1.21:5353")}},
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.1.21:40010"), ap("10.0.200.10:443")}, [2]netip.AddrPort{ap("10.0.9.20:8443"), ap("10.0.1.21:40010")}},
		// The node probes pod1's port 8080 (kubelet).
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.1.10:50000"), ap("10.0.1.21:8080")}, [2]netip.AddrPort{ap("10.0.1.21:8080"), ap("10.0.1.10:50000")}},
	)
	// What left the node for the backend, after the DNAT: a hop with a smaller MTU answers about it.
	quotedTLS := frame(pod1, remote, protoTCP, 40010, 8443)
	runCases(t, d, n, []progCase{
		{"a packet for a known pod is redirected into it", toPod, 0, frame(vpcPeer, pod1, protoTCP, 443, 40000), tcActRedirect, VerdictToPodToPeer},
		{"the reply of a Service flow to a VPC backend goes to the host to be un-NATed", toPod, 0, frame(remote, pod1, protoUDP, 53, 5353), tcActUnspec, VerdictToPodHostFlow},
		{"the same ports over another protocol go to the pod", toPod, 0, frame(remote, pod1, protoTCP, 53, 5353), tcActRedirect, VerdictToPodToPeer},
		{"a VPC client reaches a port the node probes, on the fast path", toPod, 0, frame(vpcPeer, pod1, protoTCP, 41000, 8080), tcActRedirect, VerdictToPodToPeer},
		{"fragmentation needed about a Service flow goes to the host, which translates it", toPod, 0, icmpError(addr("10.0.9.1"), pod1, icmpDestUnreachable, codeFragNeeded, quotedTLS), tcActUnspec, VerdictToPodHostFlow},
		{"fragmentation needed about a fast-path flow goes straight to the pod", toPod, 0, icmpError(addr("10.0.9.1"), pod1, icmpDestUnreachable, codeFragNeeded, frame(pod1, vpcPeer, protoTCP, 40011, 443)), tcActRedirect, VerdictToPodToPeer},
		{"time exceeded about a fast-path flow goes straight to the pod", toPod, 0, icmpError(addr("10.0.9.1"), pod1, icmpTimeExceeded, 0, withTTL(frame(pod1, vpcPeer, protoUDP, 33434, 33435), 1)), tcActRedirect, VerdictToPodToPeer},
		{"a fragment goes to the host", toPod, 0, asFragment(frame(vpcPeer, pod1, protoUDP, 53, 5353), true, 0), tcActUnspec, VerdictToPodHostFlow},
		{"a packet that would expire goes to the host", toPod, 0, withTTL(frame(vpcPeer, pod1, protoTCP, 443, 40000), 1), tcActUnspec, VerdictToPodTTL},
		{"a packet larger than the pod veth's MTU goes to the host", toPod, 0, padded(frame(vpcPeer, pod1, protoUDP, 7000, 7000), 1600), tcActUnspec, VerdictToPodTooBig},
		{"a packet for no pod passes on", toPod, 0, frame(vpcPeer, nodeIP, protoTCP, 443, 40000), tcActUnspec, VerdictToPodPass},
		{"a frame that is not IPv4 passes on", toPod, 0, arpFrame(), tcActUnspec, VerdictToPodPass},
		{"an IPv4 header shorter than 20 bytes passes on to the host, which drops it", toPod, 0, badHeaderFrame(vpcPeer, pod1), tcActUnspec, VerdictToPodPass},
		{"a packet cut inside its L4 header is still delivered by address", toPod, 0, cutFrame(vpcPeer, pod1), tcActRedirect, VerdictToPodToPeer},
		{"a pod whose veth has vanished is not reached, and that counts as a failed redirect", toPod, 0, frame(vpcPeer, podGone, protoTCP, 443, 40000), tcActShot, VerdictRedirectFailed},
	})

	t.Run("a delivered packet arrives with its TTL decremented and its checksum valid", func(t *testing.T) {
		out := runOut(t, n, d.objs.EniwToPod, 0, frame(vpcPeer, pod1, protoTCP, 443, 40000))
		if ttl := out[ethLen+8]; ttl != 63 {
			t.Errorf("TTL = %d, want 63", ttl)
		}
		if !ipChecksumValid(out) {
			t.Errorf("IPv4 header checksum is wrong after the TTL decrement")
		}
	})
}

func TestToVPCVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		// The test run arrives on loopback (ifindex 1), standing for ENI A.
		{"a pod of another ENI is moved to its own ENI", toVPC, 0, frame(pod2, vpcPeer, protoTCP, 40000, 443), tcActRedirect, VerdictToVPCRerouted},
		{"a pod of this ENI is left as routed", toVPC, 0, frame(pod1, vpcPeer, protoTCP, 40000, 443), tcActUnspec, VerdictToVPCPass},
		{"the node's own traffic is left as routed", toVPC, 0, frame(nodeIP, vpcPeer, protoTCP, 40000, 443), tcActUnspec, VerdictToVPCPass},
		{"a pod whose ENI has no entry is left as routed", toVPC, 0, frame(addr("10.0.3.23"), vpcPeer, protoTCP, 40000, 443), tcActUnspec, VerdictToVPCPass},
		{"a frame that is not IPv4 passes on", toVPC, 0, arpFrame(), tcActUnspec, VerdictToVPCPass},
		{"an IPv4 header shorter than 20 bytes passes on", toVPC, 0, badHeaderFrame(pod2, vpcPeer), tcActUnspec, VerdictToVPCPass},
	})
}

// runOut runs prog on pkt as if it arrived on ifindex (0: loopback) of netns n and returns the packet as
// the program left it.
func runOut(t *testing.T, n ns.NetNS, prog *ebpf.Program, ifindex int, pkt []byte) []byte {
	t.Helper()
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out}
	if ifindex != 0 {
		opts.Context = ArrivingOn(ifindex)
	}
	if err := n.Do(func(ns.NetNS) error { _, err := prog.Run(opts); return err }); err != nil {
		t.Fatalf("running program: %v", err)
	}
	return out[:len(pkt)]
}

// TestFromPodDropsTaggedFramesAndOtherEtherTypes: a pod sends IPv4, ARP and IPv6 neighbour discovery,
// untagged. A frame with a VLAN tag would skip the checks: the kernel strips a tag of VLAN 0 after tc has
// run and hands the inner packet to the IP stack, so a pod could send as another pod. Other EtherTypes have
// no business reaching the node.
func TestFromPodDropsTaggedFramesAndOtherEtherTypes(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"two VLAN-0 tags around another pod's IPv4 packet are dropped", fromPod, vethPod1, vlanTagged(frame(pod2, vpcPeer, protoUDP, 7000, 7000), etherTypeVLAN, etherTypeVLAN), tcActShot, VerdictFromPodVLAN},
		{"an 802.1ad tag around an 802.1Q one is dropped", fromPod, vethPod1, vlanTagged(frame(pod2, nodeIP, protoUDP, 7000, 7000), etherTypeQinQ, etherTypeVLAN), tcActShot, VerdictFromPodVLAN},
		{"one VLAN-0 tag around the pod's own packet is dropped", fromPod, vethPod1, vlanTagged(frame(pod1, vpcPeer, protoUDP, 7000, 7000), etherTypeVLAN), tcActShot, VerdictFromPodVLAN},
		{"an unknown EtherType is dropped", fromPod, vethPod1, etherTypeFrame(0x88b5), tcActShot, VerdictFromPodEtherType},
		{"MPLS is dropped", fromPod, vethPod1, etherTypeFrame(0x8847), tcActShot, VerdictFromPodEtherType},
		{"ARP still passes on to the host", fromPod, vethPod1, arpFrame(), tcActUnspec, VerdictFromPodNonIPv4},
		{"an untagged IPv4 packet is still checked and forwarded", fromPod, vethPod1, frame(pod1, vpcPeer, protoUDP, 7000, 7000), tcActRedirect, VerdictFromPodOutENI},
	})
}

// TestFromPodPassesOnlyNeighbourSolicitationsAndAdvertisements: of IPv6, a pod needs neighbour discovery
// with the host (NS, NA) and nothing more. A Router Advertisement or a Redirect would teach the node
// routes through the pod; a Router Solicitation asks a router the host veth is not.
func TestFromPodPassesOnlyNeighbourSolicitationsAndAdvertisements(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"a neighbour solicitation passes", fromPod, vethPod1, ipv6Frame(nextICMPv6, icmpv6NeighborSolicit), tcActUnspec, VerdictFromPodNonIPv4},
		{"a neighbour advertisement passes", fromPod, vethPod1, ipv6Frame(nextICMPv6, icmpv6NeighborAdvert), tcActUnspec, VerdictFromPodNonIPv4},
		{"a router advertisement is dropped", fromPod, vethPod1, ipv6Frame(nextICMPv6, icmpv6RouterAdvert), tcActShot, VerdictFromPodIPv6},
		{"a redirect is dropped", fromPod, vethPod1, ipv6Frame(nextICMPv6, icmpv6Redirect), tcActShot, VerdictFromPodIPv6},
		{"a router solicitation is dropped", fromPod, vethPod1, ipv6Frame(nextICMPv6, icmpv6RouterSolicit), tcActShot, VerdictFromPodIPv6},
	})
}

// TestToPodRefusesSourcesOfTheNodeItself: from the VPC, a packet cannot come from a pod of this node (the
// node delivers its pods' packets to each other itself) nor from the node's own address; such a packet is
// forged. A pod's address is dropped; a source the routes map gives the host (the node's own addresses, a
// host-only range) goes to the host, which drops its own addresses as martians, as a router does.
func TestToPodRefusesSourcesOfTheNodeItself(t *testing.T) {
	for _, snat := range []bool{true, false} {
		t.Run(fmt.Sprintf("SNAT %v", snat), func(t *testing.T) {
			d := openTest(t, testConfig(snat))
			putTestState(t, d)
			n := runNS(t, testVeths...)
			runCases(t, d, n, []progCase{
				{"a packet from a pod of this node is dropped", toPod, 0, frame(pod2, pod1, protoTCP, 40000, 80), tcActShot, VerdictToPodSpoof},
				{"a packet from a pod of this node whose veth vanished is dropped", toPod, 0, frame(podGone, pod1, protoUDP, 40000, 53), tcActShot, VerdictToPodSpoof},
				{"a packet from the node's own address goes to the host", toPod, 0, frame(nodeIP, pod1, protoTCP, 40000, 80), tcActUnspec, VerdictToPodHostSource},
				{"a packet from a host-only range goes to the host", toPod, 0, frame(addr("10.0.200.5"), pod1, protoUDP, 53, 5353), tcActUnspec, VerdictToPodHostSource},
				{"a packet from elsewhere in the VPC is still delivered", toPod, 0, frame(vpcPeer, pod1, protoTCP, 443, 40000), tcActRedirect, VerdictToPodToPeer},
			})
		})
	}
}

// TestFastPathLeavesHeadersARouterActsOnToTheHost: a router drops a packet whose IPv4 header checksum does
// not verify, and acts on IPv4 options (it records itself in Record Route and timestamps, refuses source
// routes unless accept_source_route). The fast paths cannot, so such packets go to the host, which does
// what a Linux router does.
func TestFastPathLeavesHeadersARouterActsOnToTheHost(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	hop := addr("10.0.9.1")
	runCases(t, d, n, []progCase{
		{"from a pod, a bad header checksum goes to the host", fromPod, vethPod2, withBadChecksum(frame(pod2, vpcPeer, protoUDP, 7000, 7000)), tcActUnspec, VerdictFromPodIPHeader},
		{"from a pod, a loose source route goes to the host", fromPod, vethPod2, withRouteOption(frame(pod2, vpcPeer, protoUDP, 7000, 7000), optLooseSource, hop), tcActUnspec, VerdictFromPodIPHeader},
		{"from a pod, a strict source route goes to the host", fromPod, vethPod2, withRouteOption(frame(pod2, pod1, protoUDP, 7000, 7000), optStrictRoute, hop), tcActUnspec, VerdictFromPodIPHeader},
		{"from a pod, Record Route goes to the host, which records itself", fromPod, vethPod2, withRouteOption(frame(pod2, vpcPeer, protoICMP, 7, 0), optRecordRoute, netip.IPv4Unspecified()), tcActUnspec, VerdictFromPodIPHeader},
		{"from the VPC, a bad header checksum goes to the host", toPod, 0, withBadChecksum(frame(vpcPeer, pod1, protoTCP, 443, 40000)), tcActUnspec, VerdictToPodIPHeader},
		{"from the VPC, a loose source route goes to the host", toPod, 0, withRouteOption(frame(vpcPeer, pod1, protoTCP, 443, 40000), optLooseSource, hop), tcActUnspec, VerdictToPodIPHeader},
		{"a plain header still takes the fast path", fromPod, vethPod2, frame(pod2, vpcPeer, protoUDP, 7000, 7000), tcActRedirect, VerdictFromPodOutENI},
	})
}

// TestToPodKeepsOutsideFlowsWhole: with SNAT on, a pod's reply to a source outside the VPC's routes goes to
// the host by its destination (to be masqueraded), so the request from it must cross the host too, or
// conntrack meets the flow at its reply. A source in the VPC or in an EXCLUDE_SNAT CIDR keeps the fast
// path both ways; without SNAT every source does.
func TestToPodKeepsOutsideFlowsWhole(t *testing.T) {
	onPrem, excluded := addr("192.168.50.7"), addr("172.16.3.4")
	cfg := func(snat bool) Config {
		c := testConfig(snat)
		c.ExcludeSNATCIDRs = []netip.Prefix{prefix("172.16.0.0/16")}
		return c
	}
	t.Run("with SNAT", func(t *testing.T) {
		d := openTest(t, cfg(true))
		putTestState(t, d)
		n := runNS(t, testVeths...)
		runCases(t, d, n, []progCase{
			{"a client outside the VPC goes to the host", toPod, 0, frame(onPrem, pod1, protoTCP, 41000, 80), tcActUnspec, VerdictToPodOutsideVPC},
			{"a UDP client outside the VPC goes to the host", toPod, 0, frame(onPrem, pod1, protoUDP, 41000, 53), tcActUnspec, VerdictToPodOutsideVPC},
			{"a client in the VPC takes the fast path", toPod, 0, frame(vpcPeer, pod1, protoTCP, 41000, 80), tcActRedirect, VerdictToPodToPeer},
			{"a client in an EXCLUDE_SNAT CIDR takes the fast path", toPod, 0, frame(excluded, pod1, protoTCP, 41000, 80), tcActRedirect, VerdictToPodToPeer},
			{"the pod's reply to an EXCLUDE_SNAT CIDR leaves by its ENI untranslated", fromPod, vethPod1, frame(pod1, excluded, protoTCP, 80, 41000), tcActRedirect, VerdictFromPodOutENI},
			{"the pod's reply to a client outside the VPC goes to the host, like the request", fromPod, vethPod1, frame(pod1, onPrem, protoTCP, 80, 41000), tcActUnspec, VerdictFromPodToHost},
		})
	})
	t.Run("without SNAT", func(t *testing.T) {
		d := openTest(t, cfg(false))
		putTestState(t, d)
		n := runNS(t, testVeths...)
		runCases(t, d, n, []progCase{
			{"a client outside the VPC takes the fast path", toPod, 0, frame(onPrem, pod1, protoTCP, 41000, 80), tcActRedirect, VerdictToPodToPeer},
			{"the pod's reply to it leaves by its ENI, like the request came", fromPod, vethPod1, frame(pod1, onPrem, protoTCP, 80, 41000), tcActRedirect, VerdictFromPodOutENI},
		})
	})
}
