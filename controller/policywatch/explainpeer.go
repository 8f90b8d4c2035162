package policywatch

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/controller/api"
)

// explainPeer adds the other end of the flow to e when the peer is a pod: a flow passes only if the peer's
// own policy allows it too (its ingress for "to PEER", its egress for "from PEER"). A pod of this node is
// judged here with its compiled state, as the datapath judges it; for a pod of another node e says that its
// node decides, and how to ask there. self are the asking pod's addresses. mu held.
func (w *Watcher) explainPeer(e *api.PolicyExplanation, f flowSpec, self []netip.Addr) {
	peerKey, peerPod, ok := w.anyPodAt(f.peer)
	if !ok {
		return
	}
	from := sameFamily(self, f.peer)
	if !from.IsValid() {
		return
	}
	reverse := f
	reverse.egress, reverse.peer = !f.egress, from
	word := "from"
	if reverse.egress {
		word = "to"
	}
	ask := fmt.Sprintf("%s %s %s", word, from, reverse.portString())
	name := peerKey.namespace + "/" + peerKey.name
	if _, local := w.local[peerKey]; !local {
		e.Reason += fmt.Sprintf("; the peer is pod %s of node %s, whose agent judges its side: eniwirectl policy %s --explain '%s' there",
			name, peerPod.Spec.NodeName, name, ask)
		return
	}
	pp, _ := w.compiler.Policy(f.peer)
	failure := ""
	if fl, failed := w.failed[f.peer]; failed {
		failure = fl.err.Error()
	}
	side := w.explain(reverse, ask, f.peer, pp, w.compiler.Selecting(f.peer), failure)
	e.Peer = &api.PeerExplanation{Pod: name, PolicyExplanation: *side}
	switch {
	case !e.Allowed:
		e.Reason += fmt.Sprintf("; the peer's side, pod %s of this node ('%s' there): %s", name, ask, side.Reason)
	case !side.Allowed:
		e.Allowed = false
		e.Reason = fmt.Sprintf("denied by the peer, pod %s of this node ('%s' there: %s); the pod's own side: %s", name, ask, side.Reason, e.Reason)
	default:
		e.Reason += fmt.Sprintf("; the peer, pod %s of this node, allows it too ('%s' there: %s)", name, ask, side.Reason)
	}
}

// anyPodAt is the pod of the watch (any node) holding address a, if any: by its status, or for a pod of this
// node by the address its ADD got before the status says it. mu held.
func (w *Watcher) anyPodAt(a netip.Addr) (podKey, *corev1.Pod, bool) {
	pods, _ := w.factory.Core().V1().Pods().Lister().List(labels.Everything())
	for _, p := range pods {
		if k := (podKey{p.Namespace, p.Name}); w.holds(k, p, a) {
			return k, p, true
		}
	}
	return podKey{}, nil, false
}

// holds reports whether pod p (key k) holds address a: by its status, or for a pod of this node by the
// addresses the agent assigned it (withAssigned).
func (w *Watcher) holds(k podKey, p *corev1.Pod, a netip.Addr) bool {
	return slices.Contains(addrsOf(w.withAssigned(k, p)), a)
}

// sameFamily is the address of addrs of peer's family (a dual-stack pod has both), or the zero Addr.
func sameFamily(addrs []netip.Addr, peer netip.Addr) netip.Addr {
	for _, a := range addrs {
		if a.Is4() == peer.Is4() {
			return a
		}
	}
	return netip.Addr{}
}
