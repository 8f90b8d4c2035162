package cluster

import (
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/netpol/cnp"
)

// peer is one peer of a rule and its members as the events left them.
type peer struct {
	spec cnp.Peer
	// pods: a namespaces or pods peer's member pods; nodes: a nodes peer's member nodes' addresses.
	pods  map[podKey]*pod
	nodes map[string][]netip.Addr
}

func newPeer(spec cnp.Peer) *peer {
	return &peer{spec: spec, pods: map[podKey]*pod{}, nodes: map[string][]netip.Addr{}}
}

// selectsPods says whether the peer's members are pods.
func (pe *peer) selectsPods() bool {
	return pe.spec.Kind == cnp.PeerNamespaces || pe.spec.Kind == cnp.PeerPods
}

// update makes the pod's membership what its version nv (nil: gone) says, old being the version before
// (the same one when its namespace's labels changed); it says whether the peer changed: the pod joined or
// left, or, a member, its addresses or ports changed.
func (pe *peer) update(old, nv *pod, nsLabels func(string) labels.Set) bool {
	if !pe.selectsPods() {
		return false
	}
	k := old
	if k == nil {
		k = nv
	}
	was, had := pe.pods[k.key]
	is := nv != nil && nv.peer && pe.spec.Namespaces.Matches(nsLabels(nv.key.namespace)) && pe.spec.Pods.Matches(nv.labels)
	switch {
	case is:
		pe.pods[k.key] = nv
		return !had || !slices.Equal(was.addrs, nv.addrs) || !slices.Equal(was.ports, nv.ports)
	case had:
		delete(pe.pods, k.key)
		return true
	}
	return false
}

// updateNode makes the node's membership what n (nil: gone) says, and says whether the peer changed.
func (pe *peer) updateNode(name string, n *node) bool {
	if pe.spec.Kind != cnp.PeerNodes {
		return false
	}
	was, had := pe.nodes[name]
	if n != nil && len(n.addrs) > 0 && pe.spec.Nodes.Matches(n.labels) {
		pe.nodes[name] = n.addrs
		return !had || !slices.Equal(was, n.addrs)
	}
	if had {
		delete(pe.nodes, name)
		return true
	}
	return false
}

// prefixes appends the peer's addresses as prefixes: pods and nodes as single addresses, networks as
// written.
func (pe *peer) prefixes(out []netip.Prefix) []netip.Prefix {
	switch pe.spec.Kind {
	case cnp.PeerNetworks:
		return append(out, pe.spec.Networks...)
	case cnp.PeerNodes:
		for _, addrs := range pe.nodes {
			out = appendHosts(out, addrs)
		}
		return out
	}
	for _, q := range pe.pods {
		out = appendHosts(out, q.addrs)
	}
	return out
}

func appendHosts(out []netip.Prefix, addrs []netip.Addr) []netip.Prefix {
	for _, a := range addrs {
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}
