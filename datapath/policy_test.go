package datapath

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

func tcp(first, last uint16) dptypes.PortRange {
	return dptypes.PortRange{Protocol: protoTCP, First: first, Last: last}
}
func udp(first, last uint16) dptypes.PortRange {
	return dptypes.PortRange{Protocol: protoUDP, First: first, Last: last}
}

var anyProtocol = dptypes.PortRange{Protocol: dptypes.AnyProtocol}

// The policies of TestPolicyVerdicts: pod2 takes in only what its rules name (an endPort range, SCTP, an
// ipBlock with an except, a rule without ports); pod1 may only open TCP to the 10.0.2.0/24 pods.
var (
	pod2Ingress = dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
		{Peer: prefix("10.0.1.21/32"), Ports: []dptypes.PortRange{tcp(80, 80)}},
		{Peer: prefix("10.0.9.0/24"), Ports: []dptypes.PortRange{udp(5000, 5010), {Protocol: protoSCTP, First: 7000, Last: 7000}}},
		{Peer: prefix("10.0.9.128/25")}, // except 10.0.9.128/25
		{Peer: prefix("10.0.8.0/24"), Ports: []dptypes.PortRange{anyProtocol}},
	}}
	pod1Egress = dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{
		{Peer: prefix("10.0.2.0/24"), Ports: []dptypes.PortRange{tcp(80, 80), tcp(8080, 8080)}},
	}}
)

func setPolicy(t *testing.T, d *Datapath, pod netip.Addr, p dptypes.PodPolicy) {
	t.Helper()
	if err := d.SetPodPolicy(context.Background(), pod, p); err != nil {
		t.Fatalf("SetPodPolicy(%s): %v", pod, err)
	}
}

// counterMoves runs f and fails unless verdict v counted exactly want more packets.
func counterMoves(t *testing.T, d *Datapath, v Verdict, want uint64, f func()) {
	t.Helper()
	before := counterNow(t, d.Reader, v)
	f()
	if got := counterNow(t, d.Reader, v) - before; got != want {
		t.Errorf("%s/%s counted %d packets, want %d", v.Program(), v, got, want)
	}
}

// policyTestNode is the programs' test state with pod2Ingress set on pod2 and pod1Egress on pod1,
// and a namespace to run packets in.
func policyTestNode(t *testing.T) (*Datapath, ns.NetNS) {
	t.Helper()
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	setPolicy(t, d, pod2, pod2Ingress)
	setPolicy(t, d, pod1, pod1Egress)
	return d, n
}

func TestPolicyVerdicts(t *testing.T) {
	d, n := policyTestNode(t)
	// A Service flow the host carries: pod1 asked a ClusterIP, the host DNAT'ed it to pod2:9000.
	addConntrack(t, n, ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.1.21:41000"), ap("10.0.200.10:80")}, [2]netip.AddrPort{ap("10.0.2.22:9000"), ap("10.0.1.21:41000")}})

	t.Run("a new flow both policies allow opens, counted allowed each way", func(t *testing.T) {
		counterMoves(t, d, VerdictFromPodEgressAllowed, 1, func() {
			counterMoves(t, d, VerdictFromPodIngressAllowed, 1, func() {
				runCases(t, d, n, []progCase{{"pod1 to pod2:80", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer}})
			})
		})
	})
	t.Run("the allowed flow has an entry of eniwire's in the kernel's conntrack", func(t *testing.T) {
		flows := conntrackFlows(t, n)
		found := false
		for _, f := range flows {
			if f.Forward.SrcIP.Equal(pod1.AsSlice()) && f.Forward.DstPort == 80 && f.Forward.SrcPort == 40000 {
				found = true
				if f.Mark&eniwireCTTagMask != eniwireCTTag {
					t.Errorf("entry %s has mark %#x, want eniwire's tag %#x", f, f.Mark, eniwireCTTag)
				}
				if f.TimeOut < 3600 {
					t.Errorf("entry %s times out in %d s, want the TCP timeout", f, f.TimeOut)
				}
			}
		}
		if !found {
			t.Errorf("no conntrack entry for pod1:40000 -> pod2:80 among %d", len(flows))
		}
	})
	runCases(t, d, n, []progCase{
		{"the reply of the allowed flow passes, though pod2's rules name no such flow", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, 40000, tcpSYN|tcpACK), tcActRedirect, VerdictFromPodToPeer},
		{"the allowed flow's next packet passes", fromPod, vethPod1, tcpWithFlags(pod1, pod2, 40000, 80, tcpACK), tcActRedirect, VerdictFromPodToPeer},
		{"pod2 asks a VPC host over UDP", fromPod, vethPod2, frame(pod2, vpcPeer, protoUDP, 40050, 53), tcActRedirect, VerdictFromPodOutENI},
		{"the first fragment of the answer passes to the host, which reassembles, though pod2's ingress names no such flow", toPod, 0, asFragment(frame(vpcPeer, pod2, protoUDP, 53, 40050), true, 0), tcActUnspec, VerdictToPodHostFlow},
		{"a first fragment of a flow pod2's ingress denies is denied", fromPod, vethPod1, asFragment(frame(pod1, pod2, protoTCP, 40009, 8080), true, 0), tcActShot, VerdictFromPodIngressDenied},
		{"a port pod2's ingress does not name is denied by ingress", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40001, 8080), tcActShot, VerdictFromPodIngressDenied},
		{"a protocol pod1's egress does not name is denied by egress", fromPod, vethPod1, frame(pod1, pod2, protoUDP, 40002, 80), tcActShot, VerdictFromPodEgressDenied},
		{"pod1's egress denies the VPC", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 40003, 443), tcActShot, VerdictFromPodEgressDenied},
		{"a flow pod2 opens to pod1 passes: neither side isolates that way", fromPod, vethPod2, frame(pod2, pod1, protoTCP, 5555, 22), tcActRedirect, VerdictFromPodToPeer},
		{"its reply passes, though pod1's egress names no such flow", fromPod, vethPod1, tcpWithFlags(pod1, pod2, 22, 5555, tcpSYN|tcpACK), tcActRedirect, VerdictFromPodToPeer},
		{"a port in an endPort range is allowed from the VPC", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5005), tcActRedirect, VerdictToPodToPeer},
		{"the range's last port is allowed", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5010), tcActRedirect, VerdictToPodToPeer},
		{"the port after the range is denied", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5011), tcActShot, VerdictToPodIngressDenied},
		{"the port before the range is denied", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 4999), tcActShot, VerdictToPodIngressDenied},
		{"an address in the except hole is denied", toPod, 0, frame(addr("10.0.9.200"), pod2, protoUDP, 999, 5005), tcActShot, VerdictToPodIngressDenied},
		{"an SCTP rule's port is allowed, and SCTP goes on to the host", toPod, 0, sctpInit(vpcPeer, pod2, 999, 7000), tcActUnspec, VerdictToPodHostFlow},
		{"an SCTP INIT to another port is denied", toPod, 0, sctpInit(vpcPeer, pod2, 999, 7001), tcActShot, VerdictToPodIngressDenied},
		{"SCTP data of the allowed association comes back to the pod that opened it", fromPod, vethPod2, sctpChunk(pod2, vpcPeer, 7000, 999, 0), tcActUnspec, VerdictFromPodHostFlow},
		{"TCP to the SCTP rule's port is denied", toPod, 0, frame(vpcPeer, pod2, protoTCP, 999, 7000), tcActShot, VerdictToPodIngressDenied},
		{"a rule without ports allows any port", toPod, 0, frame(addr("10.0.8.7"), pod2, protoTCP, 999, 12345), tcActRedirect, VerdictToPodToPeer},
		{"an address no rule names is denied", toPod, 0, frame(addr("10.0.7.7"), pod2, protoTCP, 999, 80), tcActShot, VerdictToPodIngressDenied},
		{"the node's own address reaches an isolated pod (kubelet probes): the host delivers it", toPod, 0, frame(nodeIP, pod2, protoTCP, 50000, 8080), tcActUnspec, VerdictToPodHostSource},
		{"an isolated pod answers the node: to the host", fromPod, vethPod1, frame(pod1, nodeIP, protoTCP, 10250, 50000), tcActUnspec, VerdictFromPodToHost},
		{"a flow the host carries stays the host's under a policy", fromPod, vethPod2, frame(pod2, pod1, protoTCP, 9000, 41000), tcActUnspec, VerdictFromPodHostFlow},
	})

	t.Run("a removed allow cuts the established flow, both ways", func(t *testing.T) {
		without := dptypes.PodPolicy{IngressIsolated: true, Ingress: pod2Ingress.Ingress[1:]}
		setPolicy(t, d, pod2, without)
		runCases(t, d, n, []progCase{
			{"the request", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActShot, VerdictFromPodIngressDenied},
			{"the reply", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, 40000, tcpACK), tcActShot, VerdictFromPodIngressDenied},
		})
		setPolicy(t, d, pod2, pod2Ingress)
		runCases(t, d, n, []progCase{
			{"and the allow put back lets it on", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer},
		})
	})
	t.Run("an IPv6 ipBlock of ::/0 takes in no IPv4 peer", func(t *testing.T) {
		setPolicy(t, d, pod2, dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
			{Peer: prefix("::/0"), Ports: []dptypes.PortRange{anyProtocol}},
		}})
		runCases(t, d, n, []progCase{
			{"a VPC peer", toPod, 0, frame(vpcPeer, pod2, protoTCP, 999, 80), tcActShot, VerdictToPodIngressDenied},
		})
		setPolicy(t, d, pod2, pod2Ingress)
	})
	t.Run("a cleared policy leaves the pod open", func(t *testing.T) {
		if err := d.ClearPodPolicy(context.Background(), pod1); err != nil {
			t.Fatal(err)
		}
		runCases(t, d, n, []progCase{
			{"pod1 to the VPC", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 40003, 443), tcActRedirect, VerdictFromPodOutENI},
		})
	})
}

// The conntrack mark of eniwire's entries (bpf/flow.h): ENIWIRE_CT_TAG in the top byte, ENIWIRE_CT_CLOSING
// below it, the policy generation the flow was last judged under in the low 23 bits.
const (
	eniwireCTTag            = 0xe1000000
	eniwireCTTagMask        = 0xff000000
	eniwireCTClosing        = 0x00800000
	eniwireCTGenerationMask = 0x007fffff
)

func ctMarkOf(generation uint32) uint32 { return eniwireCTTag | generation&eniwireCTGenerationMask }

// sctpChunk is an SCTP packet whose first chunk is of type chunk (1: INIT, 0: DATA).
func sctpChunk(src, dst netip.Addr, sport, dport uint16, chunk uint8) []byte {
	l4 := make([]byte, 12+16)
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	l4[12] = chunk
	binary.BigEndian.PutUint16(l4[14:], 16)
	return ipv4Frame(src, dst, protoSCTP, l4)
}

func sctpInit(src, dst netip.Addr, sport, dport uint16) []byte {
	return sctpChunk(src, dst, sport, dport, 1)
}

// icmpEcho is an ICMP echo request (typ 8) or reply (typ 0).
func icmpEcho(src, dst netip.Addr, typ uint8) []byte {
	pkt := frame(src, dst, protoICMP, 7, 0)
	pkt[ethLen+ipHeaderLen(pkt)] = typ
	return pkt
}

// policyEntries counts the entries of the two policy maps.
func policyEntryCount(t testing.TB, d *Datapath) (peers, ports int) {
	t.Helper()
	var (
		pk bpf.EniwirePolicyPeerKey
		pv bpf.EniwirePolicyPeerValue
		tk bpf.EniwirePolicyPortKey
		tv bpf.EniwirePolicyPortValue
	)
	for it := d.objs.PolicyPeers.Iterate(); it.Next(&pk, &pv); {
		peers++
	}
	for it := d.objs.PolicyPorts.Iterate(); it.Next(&tk, &tv); {
		ports++
	}
	return peers, ports
}

// peerSetOf is the peer set that the policy in a pod's flags names in direction dir.
func peerSetOf(t testing.TB, d *Datapath, flags uint32, dir bpf.EniwirePolicyDirection) uint32 {
	t.Helper()
	var sets bpf.EniwirePolicyPeerSetIds
	if err := d.objs.PolicyPeerSets.Lookup(flags&policyIDMask, &sets); err != nil {
		t.Fatalf("peer sets of policy %d: %v", flags&policyIDMask, err)
	}
	if dir == policyDirIngress {
		return sets.Ingress
	}
	return sets.Egress
}

func podFlags(t *testing.T, d *Datapath, ip netip.Addr) uint32 {
	t.Helper()
	pods, err := d.Pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.IP == ip {
			return p.Flags
		}
	}
	t.Fatalf("pod %s has no entry", ip)
	return 0
}

// TestPolicyThatDoesNotFitFailsClosed: with maps too small for a policy, SetPodPolicy returns a
// *PolicyTooLargeError, the pod allows nothing either way, its old policy's entries are gone, and other
// pods keep theirs.
func TestPolicyThatDoesNotFitFailsClosed(t *testing.T) {
	cfg := testConfig(true)
	cfg.PinRoot, cfg.Logger = testPinRoot(t), testLogger(t)
	cfg = cfg.withDefaults()
	spec, err := loadSpec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps[bpf.EniwireMapPolicyPeers].MaxEntries = 16
	d, err := load(cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(); _ = Uninstall(cfg.PinRoot) })
	putTestState(t, d)
	n := runNS(t, testVeths...)
	setPolicy(t, d, pod1, pod1Egress)
	setPolicy(t, d, pod2, pod2Ingress)
	peersBefore, _ := policyEntryCount(t, d)

	huge := dptypes.PodPolicy{IngressIsolated: true}
	for i := range 20 {
		huge.Ingress = append(huge.Ingress, dptypes.PeerPorts{Peer: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 9, byte(i)}), 32), Ports: []dptypes.PortRange{anyProtocol}})
	}
	err = d.SetPodPolicy(context.Background(), pod2, huge)
	var tooLarge *PolicyTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("SetPodPolicy of 20 peers into a map of 16 = %v, want a *PolicyTooLargeError", err)
	}
	t.Logf("SetPodPolicy: %v", err)
	if got := podFlags(t, d, pod2); got != ingressIsolated|egressIsolated {
		t.Errorf("pod2 flags = %#x, want both isolated with policy id 0 (%#x)", got, uint32(ingressIsolated|egressIsolated))
	}
	if peers, _ := policyEntryCount(t, d); peers != peersBefore-len(pod2Ingress.Ingress) {
		t.Errorf("%d peer entries left, want %d: pod1's alone", peers, peersBefore-len(pod2Ingress.Ingress))
	}
	runCases(t, d, n, []progCase{
		{"what pod2 allowed before is denied", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActShot, VerdictFromPodIngressDenied},
		{"what the new policy would allow is denied", toPod, 0, frame(addr("10.0.9.3"), pod2, protoTCP, 999, 80), tcActShot, VerdictToPodIngressDenied},
		{"pod2 may open nothing", fromPod, vethPod2, frame(pod2, vpcPeer, protoUDP, 999, 53), tcActShot, VerdictFromPodEgressDenied},
		{"pod1 keeps its own policy", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 40003, 443), tcActShot, VerdictFromPodEgressDenied},
	})
	t.Run("a policy that fits again applies", func(t *testing.T) {
		setPolicy(t, d, pod2, pod2Ingress)
		runCases(t, d, n, []progCase{
			{"pod1 to pod2:80", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer},
		})
	})
}

// TestPodPolicyState: a policy set before the pod's entry exists isolates it from its first packet; pods
// with one policy share its entries; clearing the last user deletes them; a new agent finds it all.
func TestPodPolicyState(t *testing.T) {
	cfg := testConfig(true)
	cfg.PinRoot = testPinRoot(t)
	d := openTest(t, cfg)
	pod3 := addr("10.0.1.31")
	ctx := context.Background()
	setPolicy(t, d, pod3, pod1Egress)
	setPolicy(t, d, pod1, pod1Egress)
	putTestState(t, d)
	if err := d.PutPod(pod3, vethOther, eniA); err != nil {
		t.Fatal(err)
	}
	f1, f3 := podFlags(t, d, pod1), podFlags(t, d, pod3)
	if f1 == 0 || f1 != f3 {
		t.Errorf("pod1 flags %#x, pod3 flags %#x: want one shared, non-zero policy", f1, f3)
	}
	peers, ports := policyEntryCount(t, d)
	if peers != 1 || ports != 2 {
		t.Errorf("%d peer and %d port entries, want 1 and 2 (one copy of the shared policy)", peers, ports)
	}
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"pod3's first packet meets the policy set before its entry existed", fromPod, vethOther, frame(pod3, vpcPeer, protoUDP, 999, 53), tcActShot, VerdictFromPodEgressDenied},
	})

	d2, err := Load(Config{PinRoot: cfg.PinRoot, Logger: testLogger(t), VPCCIDRs: cfg.VPCCIDRs, NodeIPs: cfg.NodeIPs, HostCIDRs: cfg.HostCIDRs, SNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	for _, p := range []netip.Addr{pod1, pod3} {
		if err := d2.ClearPodPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if peers, ports := policyEntryCount(t, d2); peers != 0 || ports != 0 {
		t.Errorf("after clearing every pod in a new agent: %d peer and %d port entries, want none", peers, ports)
	}
	if f := podFlags(t, d2, pod1); f != 0 {
		t.Errorf("pod1 flags = %#x after ClearPodPolicy, want 0", f)
	}
}

func TestPortRangesSplitIntoPrefixes(t *testing.T) {
	for _, c := range []struct {
		first, last uint16
		want        int
	}{{80, 80, 1}, {0, 65535, 1}, {5000, 5010, 3}, {1, 65535, 16}, {32768, 65535, 1}, {1024, 2047, 1}} {
		keys := portKeys(1, tcp(c.first, c.last))
		if len(keys) != c.want {
			t.Errorf("%d-%d: %d prefixes, want %d", c.first, c.last, len(keys), c.want)
		}
		covered := 0
		for _, k := range keys {
			covered += 1 << (16 - (k.Prefixlen - 80))
		}
		if covered != int(c.last)-int(c.first)+1 {
			t.Errorf("%d-%d: prefixes cover %d ports, want %d", c.first, c.last, covered, int(c.last)-int(c.first)+1)
		}
	}
}

// nfHookState is the head of the kernel's struct nf_hook_state (48 bytes), the context of a netfilter
// program's test run: the hook and protocol family the packet is seen at.
type nfHookState struct {
	Hook, PF uint8
	_        [46]byte
}

const (
	nfInetForward = 2
	nfProtoIPv4   = 2
	nfProtoIPv6   = 10
	nfDrop        = 0
	nfAccept      = 1
)

// TestForwardVerdicts: eniw_forward judges what the host forwards on its real addresses (after DNAT,
// before SNAT). A test run at FORWARD takes the Ethernet frame and hands the program the skb at its IPv4
// header; its packet has no conntrack entry, so it is judged as a flow's opening.
// forwardCase is a packet eniw_forward sees at a FORWARD hook, what it should return and count.
type forwardCase struct {
	name    string
	pkt     []byte
	want    uint32
	verdict Verdict
}

// runForwardCases runs eniw_forward on each case's packet at the FORWARD hook of protocol family pf.
func runForwardCases(t *testing.T, d *Datapath, pf uint8, cases []forwardCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := counterNow(t, d.Reader, c.verdict)
			ret, err := d.objs.EniwForward.Run(&ebpf.RunOptions{Data: c.pkt, Context: nfHookState{Hook: nfInetForward, PF: pf}})
			if err != nil {
				t.Fatal(err)
			}
			if ret != c.want {
				t.Errorf("eniw_forward returned %d, want %d", ret, c.want)
			}
			if got := counterNow(t, d.Reader, c.verdict) - before; got != 1 {
				t.Errorf("%s/%s counted %d packets, want 1", c.verdict.Program(), c.verdict, got)
			}
		})
	}
}

func TestForwardVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	setPolicy(t, d, pod2, pod2Ingress)
	setPolicy(t, d, pod1, pod1Egress)
	runForwardCases(t, d, nfProtoIPv4, []forwardCase{
		{"pod1 to a Service backend elsewhere, on a port its egress allows", frame(pod1, addr("10.0.2.50"), protoTCP, 40000, 8080), nfAccept, VerdictForwardEgressAllowed},
		{"pod1 to the internet, before SNAT: its egress denies it", frame(pod1, addr("192.0.2.7"), protoTCP, 40000, 443), nfDrop, VerdictForwardEgressDenied},
		{"a VPC client to pod2 through a NodePort, after DNAT, on its allowed range", frame(vpcPeer, pod2, protoUDP, 999, 5005), nfAccept, VerdictForwardIngressAllowed},
		{"a VPC client to pod2 through a NodePort, on a port it does not allow", frame(vpcPeer, pod2, protoUDP, 999, 5011), nfDrop, VerdictForwardIngressDenied},
		{"SCTP to pod2 on its rule's port", sctpInit(vpcPeer, pod2, 999, 7000), nfAccept, VerdictForwardIngressAllowed},
		{"SCTP to pod2 on another port", sctpInit(vpcPeer, pod2, 999, 7001), nfDrop, VerdictForwardIngressDenied},
	})
	t.Run("flows of pods no policy isolates pass uncounted", func(t *testing.T) {
		if err := d.ClearPodPolicy(context.Background(), pod1); err != nil {
			t.Fatal(err)
		}
		ret, err := d.objs.EniwForward.Run(&ebpf.RunOptions{Data: frame(pod1, addr("192.0.2.7"), protoTCP, 40000, 443), Context: nfHookState{Hook: nfInetForward, PF: nfProtoIPv4}})
		if err != nil || ret != nfAccept {
			t.Errorf("eniw_forward = %d, %v; want %d", ret, err, nfAccept)
		}
	})
}

// TestDeniedNewFlowsAreReported: a new flow a policy denies reaches ReadPolicyDenials with the pod, the
// peer, the port and whose rules denied it; a flood is cut to the per-CPU budget.
func TestDeniedNewFlowsAreReported(t *testing.T) {
	d, n := policyTestNode(t)
	const flood = 200
	runCases(t, d, n, []progCase{
		{"pod1's egress denies UDP to pod2", fromPod, vethPod1, frame(pod1, pod2, protoUDP, 40002, 80), tcActShot, VerdictFromPodEgressDenied},
		{"pod2's ingress denies the VPC on UDP 5011", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5011), tcActShot, VerdictToPodIngressDenied},
	})
	for i := range flood {
		if ret, err := runOn(n, d.objs.EniwToPod, 0, frame(vpcPeer, pod2, protoUDP, uint16(2000+i), 5011)); err != nil || ret != tcActShot {
			t.Fatalf("flood packet %d: %d, %v", i, ret, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got []PolicyDenial
	err := d.ReadPolicyDenials(ctx, func(e PolicyDenial) { got = append(got, e) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadPolicyDenials: %v", err)
	}
	if len(got) < 2 {
		t.Fatalf("%d denials reported, want at least the first two", len(got))
	}
	want := []PolicyDenial{
		{Pod: pod1, Peer: pod2, PolicyID: podFlags(t, d, pod1) & policyIDMask, Egress: true, Protocol: protoUDP, Port: 80, Verdict: VerdictFromPodEgressDenied},
		{Pod: pod2, Peer: vpcPeer, PolicyID: podFlags(t, d, pod2) & policyIDMask, Egress: false, Protocol: protoUDP, Port: 5011, Verdict: VerdictToPodIngressDenied},
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("denial %d = %+v, want %+v", i, got[i], w)
		}
	}
	if budget := 64 * runtime.NumCPU(); len(got) > budget {
		t.Errorf("%d denials reported for %d denied flows, want at most %d (64 a second per CPU)", len(got), flood+2, budget)
	}
	t.Logf("%d denied new flows, %d reported", flood+2, len(got))
}
