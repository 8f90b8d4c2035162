package datapath

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestEstablishedFlowKeepsItsVerdictUntilAPolicyChanges: an established flow is judged when it opens and
// again only after a pod's policy changed (its conntrack entry carries the policy generation it was judged
// under), so its per-packet cost does not depend on the size of the policies.
func TestEstablishedFlowKeepsItsVerdictUntilAPolicyChanges(t *testing.T) {
	d, n := policyTestNode(t)
	runCases(t, d, n, []progCase{{"pod1 opens a flow to pod2:80", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer}})

	// The entry that allows pod1 in, deleted behind the agent's back: no pod's flags change, so nothing
	// says the flow must be judged again; a new flow is judged on the maps as they are.
	var v bpf.EniwirePodValue
	if err := d.objs.Pods.Lookup(mustAddrKey(t, pod2), &v); err != nil {
		t.Fatal(err)
	}
	k, err := peerKey(policyDirIngress, prefix("10.0.1.21/32"))
	if err != nil {
		t.Fatal(err)
	}
	k.PeerSet = peerSetOf(t, d, v.Flags, policyDirIngress)
	if err := d.objs.PolicyPeers.Delete(k); err != nil {
		t.Fatalf("deleting pod1's entry in pod2's policy: %v", err)
	}
	runCases(t, d, n, []progCase{
		{"the established flow's next packet passes on its verdict", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer},
		{"its reply too", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, 40000, tcpACK), tcActRedirect, VerdictFromPodToPeer},
		{"a new flow is judged on the maps", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40001, 80), tcActShot, VerdictFromPodIngressDenied},
	})

	t.Run("a policy change makes the flow judged again: cut when its allow is gone", func(t *testing.T) {
		setPolicy(t, d, pod2, dptypes.PodPolicy{IngressIsolated: true, Ingress: pod2Ingress.Ingress[1:]})
		runCases(t, d, n, []progCase{
			{"the request", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActShot, VerdictFromPodIngressDenied},
			{"the reply", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, 40000, tcpACK), tcActShot, VerdictFromPodIngressDenied},
		})
	})
	t.Run("and allowed again, the entry takes the new generation", func(t *testing.T) {
		setPolicy(t, d, pod2, pod2Ingress)
		runCases(t, d, n, []progCase{{"the request", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer}})
		gen := policyGeneration(t, d)
		if mark := flowMark(t, n, 40000, 80); mark != ctMarkOf(gen) {
			t.Errorf("the flow's conntrack mark is %#x, want %#x (generation %d)", mark, ctMarkOf(gen), gen)
		}
	})
}

// TestAnEntryOfAnEarlierAgentIsStillEniwires: conntrack entries an agent before the generation mark wrote
// (ENIWIRE_CT_MARK 0x0e1e0001) stay on the fast path after an upgrade, judged on their next packet.
func TestAnEntryOfAnEarlierAgentIsStillEniwires(t *testing.T) {
	d, n := policyTestNode(t)
	if err := n.Do(func(ns.NetNS) error {
		f := &netlink.ConntrackFlow{
			FamilyType: netlink.FAMILY_V4,
			Forward:    ipTuple(protoTCP, [2]netip.AddrPort{ap("10.0.1.21:40200"), ap("10.0.2.22:80")}),
			Reverse:    ipTuple(protoTCP, [2]netip.AddrPort{ap("10.0.2.22:80"), ap("10.0.1.21:40200")}),
			TimeOut:    300,
			Mark:       legacyCTMark,
			ProtoInfo:  &netlink.ProtoInfoTCP{State: 3},
		}
		return netlink.ConntrackCreate(netlink.ConntrackTable, netlink.FAMILY_V4, f)
	}); err != nil {
		t.Fatalf("adding an entry of an earlier agent: %v", err)
	}
	runCases(t, d, n, []progCase{
		{"its flow stays on the fast path", fromPod, vethPod2, frame(pod2, pod1, protoTCP, 80, 40200), tcActRedirect, VerdictFromPodToPeer},
	})
	if mark, want := flowMark(t, n, 40200, 80), ctMarkOf(policyGeneration(t, d)); mark != want {
		t.Errorf("the entry's mark is %#x after its packet was judged, want %#x", mark, want)
	}
}

// legacyCTMark is the conntrack mark of eniwire's entries before the mark carried a generation.
const legacyCTMark = 0x0e1e0001

// policyGeneration reads the policy generation the programs compare conntrack marks with.
func policyGeneration(t *testing.T, d *Datapath) uint32 {
	t.Helper()
	var gen uint32
	if err := d.objs.PolicyGeneration.Lookup(uint32(0), &gen); err != nil {
		t.Fatalf("reading the policy generation: %v", err)
	}
	return gen
}

// flowMark is the conntrack mark of the flow from sport to dport in netns n (0 when there is none).
func flowMark(t *testing.T, n ns.NetNS, sport, dport uint16) uint32 {
	t.Helper()
	for _, f := range conntrackFlows(t, n) {
		if f.Forward.SrcPort == sport && f.Forward.DstPort == dport {
			return f.Mark
		}
	}
	t.Fatalf("no conntrack entry of the flow %d -> %d", sport, dport)
	return 0
}

func mustAddrKey(t *testing.T, a netip.Addr) bpf.EniwireIpAddr {
	t.Helper()
	k, err := addrKey(a)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
