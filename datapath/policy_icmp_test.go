package datapath

import (
	"testing"
)

// TestICMPOfAnIsolatedPodIsJudgedWithTheFlowItBelongsTo: an ICMP packet says by its type whether it is a
// reply or an error, but not that it answers anything. From tc, the ICMP of an isolated pod goes to the
// host, whose conntrack ties an echo reply to its request and an error to the flow it quotes; eniw_forward
// judges there what belongs to no flow as an opening of its own. So a pod under egress deny-all sends no
// echo reply or error of any payload, and a pod under ingress isolation receives none it did not ask for.
func TestICMPOfAnIsolatedPodIsJudgedWithTheFlowItBelongsTo(t *testing.T) {
	d, n := policyTestNode(t)
	runCases(t, d, n, []progCase{
		{"pod1's echo reply to the VPC, which its egress denies, goes to the host", fromPod, vethPod1, icmpEcho(pod1, vpcPeer, 0), tcActUnspec, VerdictFromPodHostFlow},
		{"pod1's ICMP error to the VPC goes to the host", fromPod, vethPod1, icmpError(pod1, vpcPeer, icmpDestUnreachable, codePortUnreachable, frame(vpcPeer, pod1, protoUDP, 53, 999)), tcActUnspec, VerdictFromPodHostFlow},
		{"an echo reply from the VPC to pod2 goes to the host", toPod, 0, icmpEcho(vpcPeer, pod2, 0), tcActUnspec, VerdictToPodHostFlow},
		{"an echo request to pod2 goes to the host", toPod, 0, icmpEcho(addr("10.0.8.7"), pod2, 8), tcActUnspec, VerdictToPodHostFlow},
	})
	// What the host's conntrack ties to no flow reaches eniw_forward untracked, judged as an opening.
	runForwardCases(t, d, nfProtoIPv4, []forwardCase{
		{"pod1's echo reply of no request, to the VPC its egress denies", icmpEcho(pod1, vpcPeer, 0), nfDrop, VerdictForwardEgressDenied},
		{"pod1's ICMP error quoting what it never received", icmpError(pod1, vpcPeer, icmpDestUnreachable, codePortUnreachable, frame(vpcPeer, pod1, protoUDP, 53, 999)), nfDrop, VerdictForwardEgressDenied},
		{"an unsolicited echo reply to pod2 from the VPC its ingress does not name", icmpEcho(vpcPeer, pod2, 0), nfDrop, VerdictForwardIngressDenied},
		{"an echo request to pod2 from a peer its ingress allows any protocol", icmpEcho(addr("10.0.8.7"), pod2, 8), nfAccept, VerdictForwardIngressAllowed},
	})
}

// TestAnICMPErrorAboutAFastPathFlowRenewsNothing: an ICMP error about a TCP flow eniwire holds an entry of
// is judged with that flow, and leaves its entry's timeout as the flow's own packets set it: a closed
// flow's entry does not get the UDP timeout back from an error about it.
func TestAnICMPErrorAboutAFastPathFlowRenewsNothing(t *testing.T) {
	d, n := policyTestNode(t)
	const client = 40400
	runCases(t, d, n, []progCase{
		{"pod1 opens a flow to pod2:80", fromPod, vethPod1, tcpWithFlags(pod1, pod2, client, 80, tcpSYN), tcActRedirect, VerdictFromPodToPeer},
		{"pod2 resets it", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, client, tcpRST|tcpACK), tcActRedirect, VerdictFromPodToPeer},
	})
	if got := entryTimeout(t, n, pod1, client, 80); got > 10 {
		t.Fatalf("the reset flow's entry times out in %d s, want the close timeout (10 s)", got)
	}
	runCases(t, d, n, []progCase{
		{"an ICMP error about the flow, from pod2 to pod1, takes the fast path with it", fromPod, vethPod2,
			icmpError(pod2, pod1, icmpDestUnreachable, codePortUnreachable, tcpWithFlags(pod1, pod2, client, 80, tcpACK)), tcActRedirect, VerdictFromPodToPeer},
	})
	if got := entryTimeout(t, n, pod1, client, 80); got > 10 {
		t.Errorf("after an ICMP error about the reset flow, its entry times out in %d s, want still at most 10 s", got)
	}
}
