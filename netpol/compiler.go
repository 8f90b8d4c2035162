package netpol

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Compiler holds the cluster's Pods, Namespaces and NetworkPolicies as the agent's informers report them,
// and the compiled PodPolicy of every pod of its node. Each upsert or delete updates its indexes and
// recompiles only the node's pods that the change can reach, and returns the addresses whose PodPolicy
// changed (appeared, changed or went away), sorted. It is not safe for concurrent use: one goroutine feeds
// it (the informers' handlers serialised), and reads Policy between events.
type Compiler struct {
	node       string
	pods       map[podKey]*pod
	namespaces map[string]*namespace
	policies   map[podKey]*policy
	// nsPeers are the active policies' pod peers with a namespace selector, which a namespace's labels
	// decide.
	nsPeers map[*peer]struct{}
	// byPortName: peer pods by port name. watchers: the policies whose egress resolves a port name on any pod
	// (watchedPorts).
	byPortName map[portName]map[*pod]struct{}
	watchers   map[portName]map[*policy]struct{}
	// selected: the node's pods each policy selects (a policy with any is active, see index.go);
	// selecting: the reverse.
	selected  map[*policy]map[*pod]struct{}
	selecting map[*pod]map[*policy]struct{}
	// owners: the node's pods by address (more than one while an address passes from a stale pod to a
	// new one); compiled: each node pod's state; out: each address's state, its owner's.
	owners   map[netip.Addr]map[*pod]struct{}
	compiled map[*pod]dptypes.PodPolicy
	out      map[netip.Addr]dptypes.PodPolicy
	// held gathers what events reach between Hold and Flush.
	held *change
	// scratch is podPolicy's working memory.
	scratch scratch
	// recompiles counts the node's pods compiled, for tests of the work an event does.
	recompiles int
}

// namespace is one namespace as the Compiler indexes it.
type namespace struct {
	name   string
	labels labels.Set
	// known: the Namespace object exists (a namespace is also held while pods or policies name it).
	known    bool
	pods     map[*pod]struct{}
	policies map[*policy]struct{}
	// peers are the active namespace-selector peers that pick this namespace.
	peers map[*peer]struct{}
}

// NewCompiler returns an empty Compiler for the node named node.
func NewCompiler(node string) *Compiler {
	return &Compiler{
		node:       node,
		pods:       map[podKey]*pod{},
		namespaces: map[string]*namespace{},
		policies:   map[podKey]*policy{},
		nsPeers:    map[*peer]struct{}{},
		byPortName: map[portName]map[*pod]struct{}{},
		watchers:   map[portName]map[*policy]struct{}{},
		selected:   map[*policy]map[*pod]struct{}{},
		selecting:  map[*pod]map[*policy]struct{}{},
		owners:     map[netip.Addr]map[*pod]struct{}{},
		compiled:   map[*pod]dptypes.PodPolicy{},
		out:        map[netip.Addr]dptypes.PodPolicy{},
	}
}

// Policy returns the compiled state of the node's pod at address a; false when no pod of the node holds
// it (its state is to be cleared). A pod that no policy selects has the zero PodPolicy. The slices are
// shared: read, never modify them.
func (c *Compiler) Policy(a netip.Addr) (dptypes.PodPolicy, bool) {
	p, ok := c.out[a]
	return p, ok
}

// Selecting returns the policies that select the node's pod at address a, as namespace/name, sorted:
// what a deny log or eniwirectl names as isolating the pod. None when no pod of the node holds a.
func (c *Compiler) Selecting(a netip.Addr) []string {
	var names []string
	for p := range c.selecting[c.owner(a)] {
		names = append(names, p.key.namespace+"/"+p.key.name)
	}
	slices.Sort(names)
	return names
}

// Policies returns the compiled state of every address of the node's pods, as Compile does.
func (c *Compiler) Policies() map[netip.Addr]dptypes.PodPolicy { return maps.Clone(c.out) }

// UpsertPod adds or updates a Pod.
func (c *Compiler) UpsertPod(p *corev1.Pod) []netip.Addr {
	nv := newPod(p)
	old := c.pods[nv.key]
	if old != nil && old.sameAs(nv) {
		return nil
	}
	ch := newChange()
	if old != nil {
		c.unindexPod(old, ch)
	}
	c.indexPod(nv, ch)
	c.settlePod(ch, old == nil || !old.sameAddrs(nv))
	return c.finish(ch)
}

// DeletePod removes a Pod.
func (c *Compiler) DeletePod(namespace, name string) []netip.Addr {
	old := c.pods[podKey{namespace, name}]
	if old == nil {
		return nil
	}
	ch := newChange()
	c.unindexPod(old, ch)
	c.settlePod(ch, true)
	c.dropIfUnused(c.namespaces[namespace])
	return c.finish(ch)
}

// UpsertNamespace adds or updates a Namespace.
func (c *Compiler) UpsertNamespace(ns *corev1.Namespace) []netip.Addr {
	n := c.namespace(ns.Name)
	n.known = true
	return c.relabel(n, NamespaceLabels(ns.Name, ns.Labels))
}

// DeleteNamespace removes a Namespace. Its pods and policies go with their own deletes; until then its
// namespace selectors see only the name label.
func (c *Compiler) DeleteNamespace(name string) []netip.Addr {
	n := c.namespaces[name]
	if n == nil {
		return nil
	}
	n.known = false
	changed := c.relabel(n, NamespaceLabels(name, nil))
	c.dropIfUnused(n)
	return changed
}

// UpsertPolicy adds or updates a NetworkPolicy.
func (c *Compiler) UpsertPolicy(np *networkingv1.NetworkPolicy) []netip.Addr {
	key := podKey{np.Namespace, np.Name}
	old := c.policies[key]
	if old != nil && equality.Semantic.DeepEqual(old.spec, np.Spec) {
		return nil
	}
	ch := newChange()
	if old != nil {
		c.unindexPolicy(old, ch)
	}
	c.indexPolicy(parsePolicy(np), ch)
	return c.finish(ch)
}

// DeletePolicy removes a NetworkPolicy.
func (c *Compiler) DeletePolicy(namespace, name string) []netip.Addr {
	old := c.policies[podKey{namespace, name}]
	if old == nil {
		return nil
	}
	ch := newChange()
	c.unindexPolicy(old, ch)
	c.dropIfUnused(c.namespaces[namespace])
	return c.finish(ch)
}

// change collects what one event reaches before the node's pods are recompiled.
type change struct {
	// peers whose members the event changed: +1 a pod joined, -1 it left (an update does both).
	peers map[*peer]int
	// names: the port names of the pod an event added, removed or updated.
	names    map[portName]struct{}
	policies map[*policy]struct{}
	pods     map[*pod]struct{}
	addrs    map[netip.Addr]struct{}
}

func newChange() *change {
	return &change{peers: map[*peer]int{}, names: map[portName]struct{}{}, policies: map[*policy]struct{}{}, pods: map[*pod]struct{}{}, addrs: map[netip.Addr]struct{}{}}
}

// settlePod marks the policies that a pod event reached: those with a peer the pod joined or left, and,
// when the event changed what the pod offers as a peer (its addresses or ports, or it came or went), those
// with a peer it stayed in and those that resolve one of its port names.
func (c *Compiler) settlePod(ch *change, changedAsPeer bool) {
	for pe, d := range ch.peers {
		if d != 0 || changedAsPeer {
			ch.policies[pe.policy] = struct{}{}
		}
	}
	if !changedAsPeer {
		return
	}
	for n := range ch.names {
		for p := range c.watchers[n] {
			ch.policies[p] = struct{}{}
		}
	}
}

// Hold makes the events that follow only update the indexes and return nothing, until Flush recompiles
// every pod they reached, once: for the informers' initial lists, where one pod would otherwise be
// recompiled for each policy that selects it.
func (c *Compiler) Hold() {
	if c.held == nil {
		c.held = newChange()
	}
}

// Flush ends a Hold: it recompiles the node's pods that the events since reached and returns the
// addresses whose state changed.
func (c *Compiler) Flush() []netip.Addr {
	ch := c.held
	if ch == nil {
		return nil
	}
	c.held = nil
	return c.finish(ch)
}

// finish recompiles the node's pods the change reached and returns the addresses whose state changed
// (during a Hold, it adds the change to the held one and returns nothing).
func (c *Compiler) finish(ch *change) []netip.Addr {
	if h := c.held; h != nil {
		maps.Copy(h.policies, ch.policies)
		maps.Copy(h.pods, ch.pods)
		maps.Copy(h.addrs, ch.addrs)
		return nil
	}
	for p := range ch.policies {
		for q := range c.selected[p] {
			ch.pods[q] = struct{}{}
		}
	}
	for q := range ch.pods {
		if c.pods[q.key] != q {
			continue // an earlier version of a pod, or one deleted since (during a Hold)
		}
		c.recompiles++
		c.compiled[q] = podPolicy(q, slices.Collect(maps.Keys(c.selecting[q])), c, &c.scratch)
		for _, a := range q.addrs {
			ch.addrs[a] = struct{}{}
		}
	}
	var changed []netip.Addr
	for a := range ch.addrs {
		owner := c.owner(a)
		old, had := c.out[a]
		if owner == nil {
			if had {
				delete(c.out, a)
				changed = append(changed, a)
			}
			continue
		}
		nv := c.compiled[owner]
		if !had || !equalPolicies(old, nv) {
			c.out[a] = nv
			changed = append(changed, a)
		}
	}
	slices.SortFunc(changed, netip.Addr.Compare)
	return changed
}

// owner is the node's pod whose state address a takes (see owns); nil when none holds it.
func (c *Compiler) owner(a netip.Addr) *pod {
	var owner *pod
	for q := range c.owners[a] {
		if owner == nil || owns(q, owner) {
			owner = q
		}
	}
	return owner
}

// members and named make the Compiler the peerSource of podPolicy, from its indexes.
func (c *Compiler) members(pe *peer, f func(netip.Addr, *pod)) { pe.members.each(f) }

func (c *Compiler) named(n portName, f func(*pod)) {
	for q := range c.byPortName[n] {
		f(q)
	}
}

func equalPolicies(a, b dptypes.PodPolicy) bool {
	eq := func(x, y dptypes.PeerPorts) bool { return x.Peer == y.Peer && slices.Equal(x.Ports, y.Ports) }
	return a.IngressIsolated == b.IngressIsolated && a.EgressIsolated == b.EgressIsolated &&
		slices.EqualFunc(a.Ingress, b.Ingress, eq) && slices.EqualFunc(a.Egress, b.Egress, eq)
}
