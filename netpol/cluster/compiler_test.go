package cluster

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol/cnp"
)

func testPod(ns, name, node, ip string, l map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// An Admin Deny of the metadata address on the node's pods in namespace "team", and a Baseline Deny of
// ingress from pods labelled role=db: the node's team pod gets the first, and the second (a rule without peers matches nothing) once a db pod exists; its Combine-d state denies the
// metadata address even where its NetworkPolicy allows every egress, a db pod's arrival and departure
// change the Baseline rule's peers, and a pod elsewhere gets nothing.
func TestAdminAndBaselineRulesReachTheNodesPods(t *testing.T) {
	c := NewCompiler("n1")
	c.UpsertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"team": "a"}}})
	c.UpsertPod(testPod("team", "web", "n1", "10.0.1.5", map[string]string{"app": "web"}))
	c.UpsertPod(testPod("other", "x", "n1", "10.0.1.6", nil))
	imds := netip.MustParsePrefix("169.254.169.254/32")
	admin := &cnp.Policy{Name: "no-imds", Tier: cnp.Admin, Priority: 10,
		Subject: cnp.PodSelection{Namespaces: labels.SelectorFromSet(labels.Set{"team": "a"}), Pods: labels.Everything()},
		Egress:  []cnp.Rule{{Name: "imds", Action: cnp.Deny, Peers: []cnp.Peer{{Kind: cnp.PeerNetworks, Networks: []netip.Prefix{imds}}}}}}
	if got := c.UpsertPolicy(admin); len(got) != 1 || got[0] != netip.MustParseAddr("10.0.1.5") {
		t.Fatalf("the Admin policy changed %v, want the team pod alone", got)
	}
	baseline := &cnp.Policy{Name: "no-db", Tier: cnp.Baseline, Priority: 5,
		Subject: cnp.PodSelection{Namespaces: labels.Everything(), Pods: labels.SelectorFromSet(labels.Set{"app": "web"})},
		Ingress: []cnp.Rule{{Name: "db", Action: cnp.Deny, Peers: []cnp.Peer{{Kind: cnp.PeerPods,
			PodSelection: cnp.PodSelection{Namespaces: labels.Everything(), Pods: labels.SelectorFromSet(labels.Set{"role": "db"})}}}}}}
	c.UpsertPolicy(baseline)
	r := c.Rules("team", "web")
	if len(r.Egress.Admin) != 1 || r.Egress.Admin[0].Peers[0] != imds || len(r.Ingress.Baseline) != 0 {
		t.Fatalf("rules %+v", r)
	}
	if !c.Rules("other", "x").Empty() {
		t.Errorf("the pod of another namespace got rules: %+v", c.Rules("other", "x"))
	}
	if got := c.UpsertPod(testPod("data", "db", "n2", "10.0.2.9", map[string]string{"role": "db"})); len(got) != 1 {
		t.Errorf("a db pod elsewhere changed %v, want the web pod", got)
	}
	if p := c.Rules("team", "web").Ingress.Baseline[0].Peers; len(p) != 1 || p[0] != netip.MustParsePrefix("10.0.2.9/32") {
		t.Errorf("the Baseline rule's peers are %v, want the db pod", p)
	}

	allEgress := dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{
		{Peer: netip.MustParsePrefix("0.0.0.0/0"), Ports: []dptypes.PortRange{{Protocol: dptypes.AnyProtocol}}}}}
	got := Combine(allEgress, c.Rules("team", "web"))
	if !got.EgressIsolated || !got.IngressIsolated {
		t.Fatalf("combined %+v: want both directions judged", got)
	}
	if allowsEntry(got.Egress, netip.MustParseAddr("169.254.169.254"), 6, 80) {
		t.Error("the NetworkPolicy allow reopened the Admin Deny of the metadata address")
	}
	if !allowsEntry(got.Egress, netip.MustParseAddr("10.9.9.9"), 6, 80) {
		t.Error("another address is denied")
	}
	if allowsEntry(got.Ingress, netip.MustParseAddr("10.0.2.9"), 6, 80) || !allowsEntry(got.Ingress, netip.MustParseAddr("10.0.2.10"), 6, 80) {
		t.Error("ingress: want the db pod denied and others allowed")
	}
	c.DeletePod("data", "db")
	if p := c.Rules("team", "web").Ingress.Baseline; len(p) != 0 {
		t.Errorf("the db pod's delete left the Baseline rule %+v", p)
	}
	if got := c.DeletePolicy("no-imds"); len(got) != 1 {
		t.Errorf("the Admin policy's delete changed %v", got)
	}
}

// allowsEntry reads entries as the datapath does: the longest prefix, then the most specific range.
func allowsEntry(entries []dptypes.PeerPorts, a netip.Addr, proto uint8, port uint16) bool {
	best := -1
	for i, e := range entries {
		if e.Peer.Contains(a) && (best < 0 || e.Peer.Bits() > entries[best].Peer.Bits()) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	verdict, width := false, -1
	for _, r := range entries[best].Ports {
		w := 0
		switch {
		case r.Protocol == dptypes.AnyProtocol:
			w = 0
		case r.Protocol == proto && r.First <= port && port <= r.Last:
			w = 1 + 65536 - int(r.Last-r.First)
		default:
			continue
		}
		if w > width {
			verdict, width = !r.Deny, w
		}
	}
	return verdict
}
