package policywatch

import (
	"context"
	"testing"
)

// TestExplainNamesThePolicyThatAllowsAFlowOrWhyNoneDoes: explain answers from the compiled state and names
// the policy whose rules allow the flow, or says what the isolating policies allow instead; a peer that is a
// pod of another node has its side judged by its own node's agent, and the answer says how to ask there.
func TestExplainNamesThePolicyThatAllowsAFlowOrWhyNoneDoes(t *testing.T) {
	s := start(t, newFakeDriver(),
		namespace("shop", nil),
		pod("shop", "web", node, "10.0.1.10", map[string]string{"app": "web"}),
		pod("shop", "client", "node-b", "10.0.2.20", map[string]string{"app": "client"}),
		pod("shop", "other", "node-b", "10.0.2.30", map[string]string{"app": "other"}),
		policy("shop", "deny", "web", "", 0),
		policy("shop", "allow-client", "web", "client", 8080),
	)
	for _, c := range []struct {
		flow    string
		allowed bool
		reason  string
	}{
		{"from 10.0.2.20 tcp/8080", true, "allowed by shop/allow-client: its ingress rules allow 10.0.2.20 (entry 10.0.2.20/32: tcp/8080); the peer is pod shop/client of node node-b, whose agent judges its side: eniwirectl policy shop/client --explain 'to 10.0.1.10 tcp/8080' there"},
		{"from 10.0.2.20 tcp/9090", false, "denied: ingress is isolated by shop/allow-client, shop/deny; their rules allow 10.0.2.20 only tcp/8080 (entry 10.0.2.20/32), not tcp/9090; the peer is pod shop/client of node node-b, whose agent judges its side: eniwirectl policy shop/client --explain 'to 10.0.1.10 tcp/9090' there"},
		{"from 10.0.2.30 tcp/8080", false, "denied: ingress is isolated by shop/allow-client, shop/deny, and no rule of theirs names a peer that holds 10.0.2.30; the peer is pod shop/other of node node-b, whose agent judges its side: eniwirectl policy shop/other --explain 'to 10.0.1.10 tcp/8080' there"},
		{"from 10.0.2.20 udp/8080", false, "denied: ingress is isolated by shop/allow-client, shop/deny; their rules allow 10.0.2.20 only tcp/8080 (entry 10.0.2.20/32), not udp/8080; the peer is pod shop/client of node node-b, whose agent judges its side: eniwirectl policy shop/client --explain 'to 10.0.1.10 udp/8080' there"},
		{"to 10.0.2.30 udp/53", true, "allowed: no policy with policyTypes Egress selects the pod, so its egress is not isolated; the peer is pod shop/other of node node-b, whose agent judges its side: eniwirectl policy shop/other --explain 'from 10.0.1.10 udp/53' there"},
	} {
		t.Run(c.flow, func(t *testing.T) {
			r, err := s.w.PolicyReport(context.Background(), "shop/web", c.flow)
			if err != nil {
				t.Fatal(err)
			}
			if e := r.Explanation; e.Allowed != c.allowed || e.Reason != c.reason {
				t.Errorf("explain %q:\n got %v %q\nwant %v %q", c.flow, e.Allowed, e.Reason, c.allowed, c.reason)
			}
		})
	}
	r, err := s.w.PolicyReport(context.Background(), "shop/web", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Policies) != 2 || !r.IngressIsolated || r.EgressIsolated || len(r.Ingress) != 1 || r.Ingress[0].Peer != "10.0.2.20/32" || r.Ingress[0].Ports[0] != "tcp/8080" {
		t.Errorf("report %+v", r)
	}
	for _, bad := range []string{"from", "via 10.0.0.1", "from 10.0.0.1 gre/1", "from 10.0.0.1 tcp/0", "from 10.0.0.1 icmp/8"} {
		if _, err := s.w.PolicyReport(context.Background(), "shop/web", bad); err == nil {
			t.Errorf("flow %q accepted", bad)
		}
	}
	if _, err := s.w.PolicyReport(context.Background(), "shop/nope", ""); err == nil {
		t.Error("a pod not on the node was reported")
	}
}

// TestExplainJudgesAPeerPodOfTheNodeToo: a flow passes only if both ends' policies allow it. When the peer
// is a pod of this node, explain judges the peer's side as well (issue 36 item 10: 'to PEER' checked only the
// pod's own egress, and said allowed while the peer's ingress denied).
func TestExplainJudgesAPeerPodOfTheNodeToo(t *testing.T) {
	s := start(t, newFakeDriver(),
		namespace("shop", nil),
		pod("shop", "web", node, "10.0.1.10", map[string]string{"app": "web"}),
		pod("shop", "client", node, "10.0.1.11", map[string]string{"app": "client"}),
		policy("shop", "allow-client", "web", "client", 8080),
	)
	for _, c := range []struct {
		pod, flow string
		allowed   bool
		reason    string
	}{
		{"shop/client", "to 10.0.1.10 tcp/9090", false, "denied by the peer, pod shop/web of this node ('from 10.0.1.11 tcp/9090' there: " +
			"denied: ingress is isolated by shop/allow-client; their rules allow 10.0.1.11 only tcp/8080 (entry 10.0.1.11/32), not tcp/9090); " +
			"the pod's own side: allowed: no policy with policyTypes Egress selects the pod, so its egress is not isolated"},
		{"shop/client", "to 10.0.1.10 tcp/8080", true, "allowed: no policy with policyTypes Egress selects the pod, so its egress is not isolated; " +
			"the peer, pod shop/web of this node, allows it too ('from 10.0.1.11 tcp/8080' there: allowed by shop/allow-client: its ingress rules allow 10.0.1.11 (entry 10.0.1.11/32: tcp/8080))"},
		{"shop/web", "from 10.0.1.11 tcp/8080", true, "allowed by shop/allow-client: its ingress rules allow 10.0.1.11 (entry 10.0.1.11/32: tcp/8080); " +
			"the peer, pod shop/client of this node, allows it too ('to 10.0.1.10 tcp/8080' there: allowed: no policy with policyTypes Egress selects the pod, so its egress is not isolated)"},
	} {
		t.Run(c.pod+" "+c.flow, func(t *testing.T) {
			r, err := s.w.PolicyReport(context.Background(), c.pod, c.flow)
			if err != nil {
				t.Fatal(err)
			}
			e := r.Explanation
			if e.Allowed != c.allowed || e.Reason != c.reason {
				t.Errorf("explain %q:\n got %v %q\nwant %v %q", c.flow, e.Allowed, e.Reason, c.allowed, c.reason)
			}
			if e.Peer == nil || e.Peer.Pod == c.pod {
				t.Errorf("explain %q: peer %+v, want the other pod's side", c.flow, e.Peer)
			}
		})
	}
}
