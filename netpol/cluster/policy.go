package cluster

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol/cnp"
	"github.com/eniwire/eniwire/netpol/tiers"
)

// policy is one ClusterNetworkPolicy, its peers' members and its rules' resolved form.
type policy struct {
	spec  *cnp.Policy
	peers []*peer
	// ingress and egress are the rules, rebuilt from the peers when stale.
	ingress, egress []*rule
	stale           bool
}

// rule is one rule of a policy, its peers resolved into prefixes.
type rule struct {
	spec  cnp.Rule
	index int
	peers []*peer
	// numbered are the rule's ports given by number; names those given by name.
	numbered []dptypes.PortRange
	names    []string
	// prefixes are every peer's, sorted, each once (build).
	prefixes []netip.Prefix
	// byPeerPorts are, for an egress rule with named ports, its pod peers grouped by what those names
	// resolve to on each (build).
	byPeerPorts []tiers.Rule
}

func newPolicy(p *cnp.Policy) *policy {
	pol := &policy{spec: p, stale: true}
	for _, d := range []struct {
		rules []cnp.Rule
		out   *[]*rule
	}{{p.Ingress, &pol.ingress}, {p.Egress, &pol.egress}} {
		for i, r := range d.rules {
			ru := &rule{spec: r, index: i}
			for _, pe := range r.Peers {
				np := newPeer(pe)
				ru.peers = append(ru.peers, np)
				pol.peers = append(pol.peers, np)
			}
			for _, port := range r.Ports {
				if port.Named() {
					ru.names = append(ru.names, port.Name)
				} else {
					ru.numbered = append(ru.numbered, port.PortRange)
				}
			}
			*d.out = append(*d.out, ru)
		}
	}
	return pol
}

// build resolves the rules' peers from their members.
func (pol *policy) build() {
	for _, ru := range pol.ingress {
		ru.build(false)
	}
	for _, ru := range pol.egress {
		ru.build(true)
	}
	pol.stale = false
}

func (ru *rule) build(egress bool) {
	// New slices: the Rules compiled before share the old ones, and are compared with the new.
	var prefixes []netip.Prefix
	for _, pe := range ru.peers {
		prefixes = pe.prefixes(prefixes)
	}
	ru.prefixes = prefixes
	ru.prefixes = sortedPrefixes(ru.prefixes)
	ru.byPeerPorts = nil
	if !egress || len(ru.names) == 0 {
		return
	}
	groups := map[string]*tiers.Rule{}
	var order []string
	for _, pe := range ru.peers {
		if !pe.selectsPods() {
			continue
		}
		for _, q := range pe.pods {
			ports := resolveNames(q, ru.names)
			if len(ports) == 0 {
				continue
			}
			key := portsKey(ports)
			g := groups[key]
			if g == nil {
				g = &tiers.Rule{Ports: ports}
				groups[key] = g
				order = append(order, key)
			}
			g.Peers = appendHosts(g.Peers, q.addrs)
		}
	}
	slices.Sort(order)
	for _, key := range order {
		g := groups[key]
		g.Peers = sortedPrefixes(g.Peers)
		ru.byPeerPorts = append(ru.byPeerPorts, *g)
	}
}

// appendRules appends the policy's rules as they apply to its subject pod q.
func (pol *policy) appendRules(r *Rules, q *pod) {
	for _, d := range []struct {
		rules []*rule
		out   *Tiers
	}{{pol.ingress, &r.Ingress}, {pol.egress, &r.Egress}} {
		tier := &d.out.Admin
		if pol.spec.Tier == cnp.Baseline {
			tier = &d.out.Baseline
		}
		egress := d.out == &r.Egress
		for _, ru := range d.rules {
			*tier = append(*tier, pol.resolved(ru, q, egress)...)
		}
	}
}

// resolved is one rule as tiers rules for the subject pod q: none when it matches nothing.
func (pol *policy) resolved(ru *rule, q *pod, egress bool) []tiers.Rule {
	base := tiers.Rule{Policy: pol.spec.Name, Priority: pol.spec.Priority, Index: ru.index, Action: actionOf(ru.spec.Action)}
	switch {
	case ru.spec.MatchesNothing():
		return nil
	case ru.spec.DeniesAll():
		base.Action, base.Peers = tiers.Deny, everyAddress
		return []tiers.Rule{base}
	}
	var out []tiers.Rule
	ports := ru.numbered
	if !egress && len(ru.names) > 0 {
		ports = append(slices.Clone(ports), resolveNames(q, ru.names)...)
	}
	// A rule without ports matches every port; one whose ports all failed to resolve matches none.
	if len(ru.prefixes) > 0 && (len(ru.spec.Ports) == 0 || len(ports) > 0) {
		b := base
		b.Peers, b.Ports = ru.prefixes, ports
		out = append(out, b)
	}
	for _, g := range ru.byPeerPorts {
		b := base
		b.Peers, b.Ports = g.Peers, g.Ports
		out = append(out, b)
	}
	return out
}

// resolveNames is what names resolve to on pod q: each container port of such a name, its own protocol.
func resolveNames(q *pod, names []string) []dptypes.PortRange {
	var out []dptypes.PortRange
	for _, n := range names {
		for _, np := range q.resolveAny(n) {
			out = append(out, dptypes.PortRange{Protocol: np.proto, First: np.port, Last: np.port})
		}
	}
	slices.SortFunc(out, comparePorts)
	return slices.Compact(out)
}

func actionOf(a cnp.Action) tiers.Action {
	switch a {
	case cnp.Accept:
		return tiers.Accept
	case cnp.Pass:
		return tiers.Pass
	}
	return tiers.Deny
}

func portsKey(ports []dptypes.PortRange) string {
	b := make([]byte, 0, 6*len(ports))
	for _, p := range ports {
		b = append(b, p.Protocol, byte(p.First>>8), byte(p.First), byte(p.Last>>8), byte(p.Last), ',')
	}
	return string(b)
}

func comparePorts(a, b dptypes.PortRange) int {
	return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.First, b.First), cmp.Compare(a.Last, b.Last))
}

// compareRules orders rules as tiers weighs them, so that equal Rules compare equal whatever the order
// the policies were held in.
func compareRules(a, b tiers.Rule) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Index, b.Index))
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, netip.Prefix.Compare)
	return slices.Compact(ps)
}
