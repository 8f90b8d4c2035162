package netpol

import (
	"maps"
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
)

// This file keeps the Compiler's indexes: which peers a pod is a member of, which namespaces a namespace
// selector picks, which of the node's pods a policy selects, and the node's pods by address. Each function
// records in a change what it touched.
//
// Only the policies that select a pod of this node are active: their pod peers keep members and take part
// in the indexes. The others (most of a large cluster's, on any one node) cost their parse and nothing
// more, until a pod of the node that they select appears.

// indexPod adds pod q to every index.
func (c *Compiler) indexPod(q *pod, ch *change) {
	c.pods[q.key] = q
	n := c.namespace(q.key.namespace)
	n.pods[q] = struct{}{}
	if q.peer {
		c.candidatePeers(n, func(pe *peer) {
			if pe.podSel.Matches(q.labels) {
				pe.members.add(q)
				ch.peers[pe]++
			}
		})
		for _, np := range q.ports {
			nm := portName{np.name, np.proto}
			addTo(c.byPortName, nm, q)
			ch.names[nm] = struct{}{}
		}
	}
	if q.local(c.node) {
		c.selecting[q] = map[*policy]struct{}{}
		for p := range n.policies {
			if p.selects(q) {
				c.link(p, q)
			}
		}
		for _, a := range q.addrs {
			addTo(c.owners, a, q)
		}
		ch.pods[q] = struct{}{}
	}
}

// unindexPod removes pod q from every index.
func (c *Compiler) unindexPod(q *pod, ch *change) {
	delete(c.pods, q.key)
	n := c.namespaces[q.key.namespace]
	delete(n.pods, q)
	if q.peer {
		c.candidatePeers(n, func(pe *peer) {
			if pe.members.remove(q) {
				ch.peers[pe]--
			}
		})
		for _, np := range q.ports {
			nm := portName{np.name, np.proto}
			removeFrom(c.byPortName, nm, q)
			ch.names[nm] = struct{}{}
		}
	}
	if _, ok := c.selecting[q]; ok {
		for p := range c.selecting[q] {
			c.unlink(p, q)
		}
		delete(c.selecting, q)
		delete(c.compiled, q)
		for _, a := range q.addrs {
			removeFrom(c.owners, a, q)
			ch.addrs[a] = struct{}{}
		}
	}
}

// candidatePeers calls f for each active pod peer whose namespace part matches namespace n: the peers
// without a namespace selector of n's active policies, and the namespace-selector peers that pick n.
func (c *Compiler) candidatePeers(n *namespace, f func(*peer)) {
	for p := range n.policies {
		if len(c.selected[p]) == 0 {
			continue
		}
		p.podPeers(func(pe *peer) {
			if pe.namespaces == nil {
				f(pe)
			}
		})
	}
	for pe := range n.peers {
		f(pe)
	}
}

// indexPolicy adds policy p and links it to the node's pods it selects.
func (c *Compiler) indexPolicy(p *policy, ch *change) {
	c.policies[p.key] = p
	n := c.namespace(p.key.namespace)
	n.policies[p] = struct{}{}
	c.selected[p] = map[*pod]struct{}{}
	for q := range n.pods {
		if q.local(c.node) && p.selects(q) {
			c.link(p, q)
			ch.pods[q] = struct{}{}
		}
	}
	for _, nm := range p.watchedPorts() {
		addTo(c.watchers, nm, p)
	}
}

// unindexPolicy removes policy p; the node's pods it selected are to be recompiled.
func (c *Compiler) unindexPolicy(p *policy, ch *change) {
	for q := range c.selected[p] {
		c.unlink(p, q)
		ch.pods[q] = struct{}{}
	}
	delete(c.selected, p)
	delete(c.policies, p.key)
	delete(c.namespaces[p.key.namespace].policies, p)
	for _, nm := range p.watchedPorts() {
		removeFrom(c.watchers, nm, p)
	}
}

// link records that policy p selects the node's pod q; p's first such pod activates it.
func (c *Compiler) link(p *policy, q *pod) {
	c.selected[p][q] = struct{}{}
	c.selecting[q][p] = struct{}{}
	if len(c.selected[p]) == 1 {
		c.activate(p)
	}
}

// unlink undoes link; p's last pod deactivates it.
func (c *Compiler) unlink(p *policy, q *pod) {
	delete(c.selecting[q], p)
	if _, ok := c.selected[p][q]; !ok {
		return
	}
	delete(c.selected[p], q)
	if len(c.selected[p]) == 0 {
		c.deactivate(p)
	}
}

// activate finds the members of p's pod peers and enters the peers in the indexes that keep them.
func (c *Compiler) activate(p *policy) {
	n := c.namespaces[p.key.namespace]
	p.podPeers(func(pe *peer) {
		pe.members = newMemberSet()
		if pe.namespaces == nil {
			c.addMembers(pe, n)
			return
		}
		c.nsPeers[pe] = struct{}{}
		for _, m := range c.namespaces {
			if pe.namespaces.Matches(m.labels) {
				m.peers[pe] = struct{}{}
				c.addMembers(pe, m)
			}
		}
	})
}

// deactivate forgets the members of p's pod peers and takes the peers out of the indexes.
func (c *Compiler) deactivate(p *policy) {
	p.podPeers(func(pe *peer) {
		pe.members = nil
		if pe.namespaces == nil {
			return
		}
		delete(c.nsPeers, pe)
		for _, m := range c.namespaces {
			delete(m.peers, pe)
		}
	})
}

// relabel gives namespace n new labels and updates the namespace-selector peers that pick it.
func (c *Compiler) relabel(n *namespace, l labels.Set) []netip.Addr {
	if maps.Equal(n.labels, l) {
		return nil
	}
	n.labels = l
	ch := newChange()
	for pe := range c.nsPeers {
		_, was := n.peers[pe]
		now := pe.namespaces.Matches(l)
		if was == now {
			continue
		}
		if now {
			n.peers[pe] = struct{}{}
			c.addMembers(pe, n)
		} else {
			delete(n.peers, pe)
			for q := range n.pods {
				pe.members.remove(q)
			}
		}
		ch.policies[pe.policy] = struct{}{}
	}
	return c.finish(ch)
}

// addMembers adds the pods of namespace n that pod peer pe's pod selector matches.
func (c *Compiler) addMembers(pe *peer, n *namespace) {
	for q := range n.pods {
		if q.peer && pe.podSel.Matches(q.labels) {
			pe.members.add(q)
		}
	}
}

// namespace returns the namespace named name, held from now on, with the peers that pick it.
func (c *Compiler) namespace(name string) *namespace {
	if n := c.namespaces[name]; n != nil {
		return n
	}
	n := &namespace{
		name:     name,
		labels:   NamespaceLabels(name, nil),
		pods:     map[*pod]struct{}{},
		policies: map[*policy]struct{}{},
		peers:    map[*peer]struct{}{},
	}
	for pe := range c.nsPeers {
		if pe.namespaces.Matches(n.labels) {
			n.peers[pe] = struct{}{}
		}
	}
	c.namespaces[name] = n
	return n
}

// dropIfUnused forgets namespace n once nothing names it.
func (c *Compiler) dropIfUnused(n *namespace) {
	if n != nil && !n.known && len(n.pods) == 0 && len(n.policies) == 0 {
		delete(c.namespaces, n.name)
	}
}

func addTo[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	s := m[k]
	if s == nil {
		s = map[V]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

func removeFrom[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	delete(m[k], v)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}
