package cluster

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/netpol"
	"github.com/eniwire/eniwire/netpol/cnp"
)

// Compiler holds the cluster's Pods, Namespaces, Nodes and ClusterNetworkPolicies and the Rules of each
// pod of its node. Each method takes one event and returns the addresses of the node's pods whose Rules
// changed, sorted. It is not safe for concurrent use: one goroutine feeds it (the informers' handlers
// serialised) and reads Rules between events.
type Compiler struct {
	node        string
	pods        map[podKey]*pod
	byNamespace map[string]map[podKey]*pod
	namespaces  map[string]labels.Set
	nodes       map[string]*node
	policies    map[string]*policy
	// compiled are the node's pods' Rules; a pod no policy reaches has none.
	compiled map[podKey]Rules
	// recompiles counts the node's pods compiled, for tests of the work an event does.
	recompiles int
}

// NewCompiler returns an empty Compiler for the node named node.
func NewCompiler(nodeName string) *Compiler {
	return &Compiler{
		node: nodeName, pods: map[podKey]*pod{}, byNamespace: map[string]map[podKey]*pod{},
		namespaces: map[string]labels.Set{}, nodes: map[string]*node{}, policies: map[string]*policy{},
		compiled: map[podKey]Rules{},
	}
}

// Rules is the Rules of the node's pod namespace/name: empty when no policy reaches it.
func (c *Compiler) Rules(namespace, name string) Rules { return c.compiled[podKey{namespace, name}] }

// Policies is how many ClusterNetworkPolicies the Compiler holds.
func (c *Compiler) Policies() int { return len(c.policies) }

// UpsertPolicy adds or replaces a parsed ClusterNetworkPolicy.
func (c *Compiler) UpsertPolicy(p *cnp.Policy) []netip.Addr {
	pol := newPolicy(p)
	for _, pe := range pol.peers {
		c.fill(pe)
	}
	c.policies[p.Name] = pol
	return c.recompileAll()
}

// DeletePolicy removes the ClusterNetworkPolicy named name.
func (c *Compiler) DeletePolicy(name string) []netip.Addr {
	if _, ok := c.policies[name]; !ok {
		return nil
	}
	delete(c.policies, name)
	return c.recompileAll()
}

// UpsertPod adds or updates a Pod.
func (c *Compiler) UpsertPod(p *corev1.Pod) []netip.Addr {
	nv := newPod(p)
	old := c.pods[nv.key]
	if old != nil && old.same(nv) {
		return nil
	}
	c.pods[nv.key] = nv
	ns := c.byNamespace[nv.key.namespace]
	if ns == nil {
		ns = map[podKey]*pod{}
		c.byNamespace[nv.key.namespace] = ns
	}
	ns[nv.key] = nv
	return c.podChanged(old, nv)
}

// DeletePod removes a Pod.
func (c *Compiler) DeletePod(namespace, name string) []netip.Addr {
	k := podKey{namespace, name}
	old := c.pods[k]
	if old == nil {
		return nil
	}
	delete(c.pods, k)
	delete(c.byNamespace[namespace], k)
	if len(c.byNamespace[namespace]) == 0 {
		delete(c.byNamespace, namespace)
	}
	return c.podChanged(old, nil)
}

// UpsertNamespace adds or updates a Namespace.
func (c *Compiler) UpsertNamespace(ns *corev1.Namespace) []netip.Addr {
	return c.relabel(ns.Name, netpol.NamespaceLabels(ns.Name, ns.Labels))
}

// DeleteNamespace removes a Namespace: its pods go with their own deletes, and until then its selectors
// see the name label alone.
func (c *Compiler) DeleteNamespace(name string) []netip.Addr {
	changed := c.relabel(name, netpol.NamespaceLabels(name, nil))
	delete(c.namespaces, name)
	return changed
}

// UpsertNode adds or updates a Node.
func (c *Compiler) UpsertNode(n *corev1.Node) []netip.Addr {
	nv := newNode(n)
	if old := c.nodes[n.Name]; old != nil && old.same(nv) {
		return nil
	}
	c.nodes[n.Name] = nv
	return c.nodeChanged(nv.name)
}

// DeleteNode removes a Node.
func (c *Compiler) DeleteNode(name string) []netip.Addr {
	if _, ok := c.nodes[name]; !ok {
		return nil
	}
	delete(c.nodes, name)
	return c.nodeChanged(name)
}

// podChanged updates the peers the pod was or is a member of; the node's pods are compiled again when a
// peer changed, and the pod itself when it is (or was) one of the node's.
func (c *Compiler) podChanged(old, nv *pod) []netip.Addr {
	peersChanged := false
	for _, pol := range c.policies {
		for _, pe := range pol.peers {
			if pe.update(old, nv, c.namespaceLabels) {
				pol.stale = true
				peersChanged = true
			}
		}
	}
	if peersChanged {
		return c.recompileAll()
	}
	var changed []netip.Addr
	for _, q := range []*pod{old, nv} {
		if q != nil && q.node == c.node {
			changed = append(changed, c.recompile(q.key)...)
		}
	}
	return sortedUnique(changed)
}

// relabel gives a namespace its labels and asks every peer about its pods.
func (c *Compiler) relabel(name string, l labels.Set) []netip.Addr {
	if old, ok := c.namespaces[name]; ok && labels.Equals(old, l) {
		return nil
	}
	c.namespaces[name] = l
	if len(c.policies) == 0 {
		return nil
	}
	for _, pol := range c.policies {
		for _, pe := range pol.peers {
			for _, q := range c.byNamespace[name] {
				if pe.update(q, q, c.namespaceLabels) {
					pol.stale = true
				}
			}
		}
	}
	return c.recompileAll()
}

// nodeChanged asks every nodes peer about the node.
func (c *Compiler) nodeChanged(name string) []netip.Addr {
	any := false
	for _, pol := range c.policies {
		for _, pe := range pol.peers {
			if pe.updateNode(name, c.nodes[name]) {
				pol.stale = true
				any = true
			}
		}
	}
	if !any {
		return nil
	}
	return c.recompileAll()
}

// fill gives a new peer its members from every pod and node held.
func (c *Compiler) fill(pe *peer) {
	for _, q := range c.pods {
		pe.update(nil, q, c.namespaceLabels)
	}
	for name, n := range c.nodes {
		pe.updateNode(name, n)
	}
}

// namespaceLabels is the labels of the namespace named name.
func (c *Compiler) namespaceLabels(name string) labels.Set {
	if l, ok := c.namespaces[name]; ok {
		return l
	}
	return netpol.NamespaceLabels(name, nil)
}

// recompileAll compiles every pod of the node again: a policy, or the members of one of its peers,
// changed. Policies whose peers changed rebuild their rules' prefixes first, once.
func (c *Compiler) recompileAll() []netip.Addr {
	for _, pol := range c.policies {
		if pol.stale {
			pol.build()
		}
	}
	var changed []netip.Addr
	for k, q := range c.pods {
		if q.node == c.node {
			changed = append(changed, c.recompile(k)...)
		}
	}
	for k := range c.compiled {
		if q := c.pods[k]; q == nil || q.node != c.node {
			changed = append(changed, c.recompile(k)...)
		}
	}
	return sortedUnique(changed)
}

// recompile compiles the node's pod k and returns its addresses when its Rules changed.
func (c *Compiler) recompile(k podKey) []netip.Addr {
	q := c.pods[k]
	var nv Rules
	if q != nil && q.node == c.node && q.peer {
		c.recompiles++
		nv = c.rulesOf(q)
	}
	old := c.compiled[k]
	if equalRules(old, nv) {
		return nil
	}
	if nv.Empty() {
		delete(c.compiled, k)
	} else {
		c.compiled[k] = nv
	}
	if q == nil {
		return nil // its addresses' state goes with the pod (the caller knows them)
	}
	return q.addrs
}

// rulesOf is the Rules of the node's pod q, from the policies that select it.
func (c *Compiler) rulesOf(q *pod) Rules {
	var r Rules
	nsLabels := c.namespaceLabels(q.key.namespace)
	for _, pol := range c.policies {
		if !pol.spec.Subject.Namespaces.Matches(nsLabels) || !pol.spec.Subject.Pods.Matches(q.labels) {
			continue
		}
		pol.appendRules(&r, q)
	}
	for _, t := range []*Tiers{&r.Ingress, &r.Egress} {
		slices.SortStableFunc(t.Admin, compareRules)
		slices.SortStableFunc(t.Baseline, compareRules)
	}
	return r
}

func sortedUnique(addrs []netip.Addr) []netip.Addr {
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
}
