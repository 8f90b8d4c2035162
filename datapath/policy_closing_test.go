package datapath

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// TCP header flags, as tcpWithFlags sets them.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// tcpWithFlags is frame's TCP packet with the given flags.
func tcpWithFlags(src, dst netip.Addr, sport, dport uint16, flags byte) []byte {
	pkt := frame(src, dst, protoTCP, sport, dport)
	pkt[ethLen+20+13] = flags
	return pkt
}

// TestAClosedFlowsEntryLivesOnlyTheClosingTimeout: once a FIN has passed, the entry of eniwire's outlives
// the flow's last packet by the kernel's closing timeout (2 min, its fin_wait and time_wait), the final ACK
// included; once an RST has, by its close timeout (10 s), a late ACK included. So a node whose isolated pods
// open many short connections does not keep each one's entry for the TCP timeout (6 h) and fill conntrack,
// and a half-closed connection whose other side answers late is not cut; a SYN that opens the same tuple
// again makes it an open flow's entry again.
func TestAClosedFlowsEntryLivesOnlyTheClosingTimeout(t *testing.T) {
	d, n := policyTestNode(t)
	for _, c := range []struct {
		name    string
		sport   uint16
		timeout uint32 // the closing timeout, seconds
		close   []progCase
	}{
		{"closed by a FIN each way", 40100, 120, []progCase{
			{"pod1's FIN", fromPod, vethPod1, tcpWithFlags(pod1, pod2, 40100, 80, tcpFIN|tcpACK), tcActRedirect, VerdictFromPodToPeer},
			{"pod2's FIN", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, 40100, tcpFIN|tcpACK), tcActRedirect, VerdictFromPodToPeer},
			{"pod1's last ACK", fromPod, vethPod1, tcpWithFlags(pod1, pod2, 40100, 80, tcpACK), tcActRedirect, VerdictFromPodToPeer},
		}},
		{"reset", 40101, 10, []progCase{
			{"pod2's RST", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, 40101, tcpRST|tcpACK), tcActRedirect, VerdictFromPodToPeer},
			{"a late ACK of pod1's", fromPod, vethPod1, tcpWithFlags(pod1, pod2, 40101, 80, tcpACK), tcActRedirect, VerdictFromPodToPeer},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runCases(t, d, n, []progCase{
				{"pod1's SYN", fromPod, vethPod1, tcpWithFlags(pod1, pod2, c.sport, 80, tcpSYN), tcActRedirect, VerdictFromPodToPeer},
				{"pod2's SYN-ACK", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, c.sport, tcpSYN|tcpACK), tcActRedirect, VerdictFromPodToPeer},
				{"pod1's ACK", fromPod, vethPod1, tcpWithFlags(pod1, pod2, c.sport, 80, tcpACK), tcActRedirect, VerdictFromPodToPeer},
			})
			if got := entryTimeout(t, n, pod1, c.sport, 80); got < 3600 {
				t.Fatalf("the open flow's entry times out in %d s, want the TCP timeout", got)
			}
			runCases(t, d, n, c.close)
			if got := entryTimeout(t, n, pod1, c.sport, 80); got > c.timeout || got+5 < c.timeout {
				t.Errorf("after the flow closed, its entry times out in %d s, want the closing timeout (%d s)", got, c.timeout)
			}
			if mark := flowMark(t, n, c.sport, 80); mark&eniwireCTTagMask != eniwireCTTag || mark&eniwireCTClosing == 0 {
				t.Errorf("after the flow closed, its mark is %#x, want eniwire's tag and the closing bit %#x", mark, eniwireCTClosing)
			}
			runCases(t, d, n, []progCase{
				{"a new SYN on the same tuple", fromPod, vethPod1, tcpWithFlags(pod1, pod2, c.sport, 80, tcpSYN), tcActRedirect, VerdictFromPodToPeer},
			})
			if got := entryTimeout(t, n, pod1, c.sport, 80); got < 3600 {
				t.Errorf("the reopened flow's entry times out in %d s, want the TCP timeout", got)
			}
			if mark := flowMark(t, n, c.sport, 80); mark&eniwireCTClosing != 0 {
				t.Errorf("the reopened flow's mark is %#x, want the closing bit clear", mark)
			}
		})
	}
}

// entryTimeout is the seconds left to the conntrack entry of the TCP flow from src:sport to dport.
func entryTimeout(t *testing.T, n ns.NetNS, src netip.Addr, sport, dport uint16) uint32 {
	t.Helper()
	flows := conntrackFlows(t, n)
	for _, f := range flows {
		if f.Forward.SrcIP.Equal(src.AsSlice()) && f.Forward.SrcPort == sport && f.Forward.DstPort == dport {
			return f.TimeOut
		}
	}
	t.Fatalf("no conntrack entry for %s:%d -> :%d among %d", src, sport, dport, len(flows))
	return 0
}
