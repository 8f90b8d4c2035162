package datapath

import (
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestAFlowTakenUpMidStreamIsRecordedAsItsClientOpenedIt: a TCP flow that began before its pods were
// isolated has no entry, and the first packet after the change may be the server's (data it pushes). The
// entry must record the flow as the client opened it, so that a later ingress deny-all on the server cuts
// it; a client under ingress deny-all keeps the flow it opened; and a stranger's SYN against an entry's
// direction is judged as the opening it is.
func TestAFlowTakenUpMidStreamIsRecordedAsItsClientOpenedIt(t *testing.T) {
	d, n := policyTestNode(t)
	const client = 40300
	runCases(t, d, n, []progCase{
		{"the server pushes data first, on a flow pod1 opened to pod2:80 before the policies", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, client, tcpACK), tcActRedirect, VerdictFromPodToPeer},
	})
	flows := conntrackFlows(t, n)
	recorded := false
	for _, f := range flows {
		if f.Forward.DstPort == 80 && f.Forward.SrcPort == client {
			recorded = f.Forward.SrcIP.Equal(pod1.AsSlice())
			if !recorded {
				t.Errorf("the flow's entry is %s: recorded as opened by %s, want by the client pod1 (%s)", f, f.Forward.SrcIP, pod1)
			}
		}
		if f.Forward.SrcPort == 80 && f.Forward.DstPort == client {
			t.Errorf("the flow's entry is %s: recorded as opened by the server pod2, which sent first", f)
		}
	}
	if !recorded {
		t.Errorf("no entry recorded pod1:%d -> pod2:80 as its opening, among %d entries", client, len(flows))
	}

	setPolicy(t, d, pod2, dptypes.PodPolicy{IngressIsolated: true})
	runCases(t, d, n, []progCase{
		{"after an ingress deny-all on the server, its pushed data is cut", fromPod, vethPod2, tcpWithFlags(pod2, pod1, 80, client, tcpACK), tcActShot, VerdictFromPodIngressDenied},
		{"and so is the client's ACK", fromPod, vethPod1, tcpWithFlags(pod1, pod2, client, 80, tcpACK), tcActShot, VerdictFromPodIngressDenied},
	})
	setPolicy(t, d, pod2, pod2Ingress)

	setPolicy(t, d, pod1, dptypes.PodPolicy{IngressIsolated: true})
	runCases(t, d, n, []progCase{
		{"a client under ingress deny-all keeps the flow it opened to the VPC before", toPod, 0, tcpWithFlags(vpcPeer, pod1, 443, 40301, tcpACK), tcActRedirect, VerdictToPodToPeer},
		{"its own next packet passes too", fromPod, vethPod1, tcpWithFlags(pod1, vpcPeer, 40301, 443, tcpACK), tcActRedirect, VerdictFromPodOutENI},
		{"a SYN from the VPC against that flow's direction is judged as an opening: denied", toPod, 0, tcpWithFlags(vpcPeer, pod1, 443, 40301, tcpSYN), tcActShot, VerdictToPodIngressDenied},
		// A mid-stream packet says nothing of its opener: one from a stranger is taken up as pod1's own flow
		// (pod1's kernel, holding no such connection, answers it with an RST), and the stranger's SYN on the
		// same tuple is still judged as the opening it is.
		{"a stranger's mid-stream packet to pod1:9090 is taken up as pod1's flow to the stranger's 8080", toPod, 0, tcpWithFlags(vpcPeer, pod1, 8080, 9090, tcpACK), tcActRedirect, VerdictToPodToPeer},
		{"the stranger's SYN on that tuple is denied: no connection opens against ingress deny-all", toPod, 0, tcpWithFlags(vpcPeer, pod1, 8080, 9090, tcpSYN), tcActShot, VerdictToPodIngressDenied},
	})
}
