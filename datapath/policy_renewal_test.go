package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// TestAnEntryIsRenewedOnceItRanDownByTheMargin: a packet of a flow the policies allow renews the flow's
// entry of eniwire's only once the entry has lost more than the renewal margin (1 s) of its timeout (6 h
// open, 10 s closing); an entry with more left keeps its timeout as it is. The entry's timeout is set with
// conntrack's netlink update, as its running down would leave it; the cases on both sides of the margin,
// in seconds of the kernel's own jiffies, hold only when the programs count the kernel's ticks per second
// right (a count 4 times too high renews the 12 s entry, 2 times too low leaves the 5 s one).
func TestAnEntryIsRenewedOnceItRanDownByTheMargin(t *testing.T) {
	d, n := policyTestNode(t)
	for i, c := range []struct {
		name       string
		closing    bool
		left       uint32 // the entry's timeout before the packet, in seconds
		atLeast    uint32 // its timeout after, in seconds (as ctnetlink rounds it: down)
		atMost     uint32
		renewedNow bool
	}{
		{"an open flow's entry with more than its timeout left keeps it", false, 7 * 3600, 7*3600 - 2, 7 * 3600, false},
		{"an open flow's entry that lost 10 minutes gets 6 hours back", false, 6*3600 - 600, 6*3600 - 2, 6 * 3600, true},
		{"an open flow's entry about to expire gets 6 hours back", false, 2, 6*3600 - 2, 6 * 3600, true},
		{"a closing flow's entry with 12 s left keeps them", true, 12, 11, 12, false},
		{"a closing flow's entry with 5 s left gets 10 s back", true, 5, 8, 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sport := uint16(40200 + i)
			openFlow(t, d, n, sport)
			last := tcpWithFlags(pod1, pod2, sport, 80, tcpACK)
			if c.closing {
				runCases(t, d, n, []progCase{{"pod1's FIN", fromPod, vethPod1, tcpWithFlags(pod1, pod2, sport, 80, tcpFIN|tcpACK), tcActRedirect, VerdictFromPodToPeer}})
			}
			setEntryTimeout(t, n, pod1, sport, 80, c.left)
			runCases(t, d, n, []progCase{{"pod1's ACK", fromPod, vethPod1, last, tcActRedirect, VerdictFromPodToPeer}})
			got := entryTimeout(t, n, pod1, sport, 80)
			if got < c.atLeast || got > c.atMost {
				t.Errorf("with %d s left, a packet left the entry %d s, want %d to %d s (renewed: %t)", c.left, got, c.atLeast, c.atMost, c.renewedNow)
			}
		})
	}
}

// TestAFlowWhoseEntryRanDownLivesOnWhilePacketsCome: packets of a flow keep its entry alive past the
// timeout it had (renewed once it ran down), and a flow that falls silent still expires.
func TestAFlowWhoseEntryRanDownLivesOnWhilePacketsCome(t *testing.T) {
	d, n := policyTestNode(t)
	const sport = 40300
	openFlow(t, d, n, sport)
	runCases(t, d, n, []progCase{{"pod1's FIN", fromPod, vethPod1, tcpWithFlags(pod1, pod2, sport, 80, tcpFIN|tcpACK), tcActRedirect, VerdictFromPodToPeer}})
	setEntryTimeout(t, n, pod1, sport, 80, 2)
	ack := tcpWithFlags(pod1, pod2, sport, 80, tcpACK)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if ret, err := runOn(n, d.objs.EniwFromPod, vethPod1, ack); err != nil || ret != tcActRedirect {
			t.Fatalf("pod1's ACK: %d, %v; want a redirect", ret, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := entryTimeout(t, n, pod1, sport, 80); got < 8 {
		t.Errorf("3 s after its entry had 2 s left, with a packet every 200 ms, the entry has %d s left, want the closing timeout's 10 s less at most the margin", got)
	}
}

// openFlow opens pod1:sport -> pod2:80 under policyTestNode's policies: SYN, SYN-ACK, ACK.
func openFlow(t *testing.T, d *Datapath, n ns.NetNS, sport uint16) {
	t.Helper()
	runCases(t, d, n, []progCase{
		{"pod1's SYN", fromPod, vethPod1, tcpWithFlags(pod1, pod2, sport, 80, tcpSYN), tcActRedirect, VerdictFromPodToPeer},
		{"pod2's SYN-ACK", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, sport, tcpSYN|tcpACK), tcActRedirect, VerdictFromPodToPeer},
		{"pod1's ACK", fromPod, vethPod1, tcpWithFlags(pod1, pod2, sport, 80, tcpACK), tcActRedirect, VerdictFromPodToPeer},
	})
}

// setEntryTimeout sets the timeout of the conntrack entry of the TCP flow from src:sport to dport to secs
// seconds from now, its mark unchanged.
func setEntryTimeout(t *testing.T, n ns.NetNS, src netip.Addr, sport, dport uint16, secs uint32) {
	t.Helper()
	for _, f := range conntrackFlows(t, n) {
		if !f.Forward.SrcIP.Equal(src.AsSlice()) || f.Forward.SrcPort != sport || f.Forward.DstPort != dport {
			continue
		}
		f.TimeOut = secs
		f.ProtoInfo = nil
		if err := n.Do(func(ns.NetNS) error {
			return netlink.ConntrackUpdate(netlink.ConntrackTable, netlink.FAMILY_V4, f)
		}); err != nil {
			t.Fatalf("setting the entry's timeout: %v", err)
		}
		if got := entryTimeout(t, n, src, sport, dport); got > secs || got+1 < secs {
			t.Fatalf("the entry's timeout is %d s after setting it to %d s", got, secs)
		}
		return
	}
	t.Fatalf("no conntrack entry for %s:%d -> :%d", src, sport, dport)
}
