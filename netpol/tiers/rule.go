package tiers

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Action is what a rule does with the flows it matches.
type Action uint8

const (
	// Accept allows the flow; no later rule or tier is asked.
	Accept Action = iota + 1
	// Deny drops the flow; no later rule or tier is asked.
	Deny
	// Pass skips the rest of its tier: from the Admin tier to the NetworkPolicy tier, from the Baseline
	// tier to the default.
	Pass
)

func (a Action) String() string {
	switch a {
	case Accept:
		return "Accept"
	case Deny:
		return "Deny"
	case Pass:
		return "Pass"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// restrictiveness orders the answers of policies of equal priority: the greatest wins (see the package
// doc for why).
func (a Action) restrictiveness() int {
	switch a {
	case Accept:
		return 0
	case Pass:
		return 1
	}
	return 2
}

// Rule is one rule of a ClusterNetworkPolicy for one direction, its peers and ports resolved by the
// caller.
type Rule struct {
	// Policy and Priority are the policy's name and its priority in its tier (lower first); together they
	// are the policy.
	Policy   string
	Priority int32
	// Index is the rule's place in its policy (lower first).
	Index  int
	Action Action
	// Peers are the prefixes of the peers the rule names: pods as /32 or /128, networks as written, nodes
	// as their addresses. No peers match nothing; every address is 0.0.0.0/0 and ::/0.
	Peers []netip.Prefix
	// Ports are the protocols and ports the rule names; nil or empty is every protocol and port.
	Ports []dptypes.PortRange
}

// RuleRef names a rule: its policy and its place there.
type RuleRef struct {
	Policy   string
	Priority int32
	Index    int
}

// Ref is the name of r.
func (r Rule) Ref() RuleRef { return RuleRef{Policy: r.Policy, Priority: r.Priority, Index: r.Index} }

// Direction is what decides the flows of one pod in one direction: its tiers.
type Direction struct {
	Admin []Rule
	// Isolated says whether a NetworkPolicy isolates the pod in this direction (dptypes.PodPolicy's
	// IngressIsolated or EgressIsolated); NetworkPolicy is then what it allows (PodPolicy's Ingress or
	// Egress), read longest prefix first. Unisolated, NetworkPolicy is not read.
	Isolated      bool
	NetworkPolicy []dptypes.PeerPorts
	Baseline      []Rule
}

// ordered is a tier's rules in the order it weighs them, the one order Judge and Flatten both read: by
// priority, then policy name, then index, equal indexes as given; an action other than Accept, Deny and
// Pass is read as Deny (fail closed).
func ordered(rules []Rule) []Rule {
	out := slices.Clone(rules)
	slices.SortStableFunc(out, func(a, b Rule) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Index, b.Index))
	})
	for i := range out {
		if a := out[i].Action; a != Accept && a != Pass {
			out[i].Action = Deny
		}
	}
	return out
}

// runs splits s into its maximal runs of neighbours that same says belong together: a tier's ordered
// rules into priorities, a priority's rules into policies.
func runs[T any](s []T, same func(a, b T) bool) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for lo := 0; lo < len(s); {
			hi := lo + 1
			for hi < len(s) && same(s[lo], s[hi]) {
				hi++
			}
			if !yield(s[lo:hi]) {
				return
			}
			lo = hi
		}
	}
}

func samePriority(a, b Rule) bool { return a.Priority == b.Priority }
func samePolicy(a, b Rule) bool   { return a.Priority == b.Priority && a.Policy == b.Policy }

// hasPorts says whether flows of a protocol have ports: TCP, UDP and SCTP.
func hasPorts(protocol uint8) bool { return protocol == 6 || protocol == 17 || protocol == 132 }

// portedProtocols are the protocols with ports, in the order an Entry lists them.
var portedProtocols = [...]uint8{6, 17, 132}

// span is the ports of protocol that r holds, if any: every port for AnyProtocol, none for a range of a
// protocol without ports or an empty range. For a protocol without ports, "every port" is the only one.
func span(r dptypes.PortRange, protocol uint8) (first, last uint16, ok bool) {
	switch {
	case r.Protocol == dptypes.AnyProtocol:
		return dptypes.AllPorts[0], dptypes.AllPorts[1], true
	case r.Protocol == protocol && hasPorts(protocol) && r.First <= r.Last:
		return r.First, r.Last, true
	}
	return 0, 0, false
}

// holds says whether ranges hold a protocol and port.
func holds(ranges []dptypes.PortRange, protocol uint8, port uint16) bool {
	return slices.ContainsFunc(ranges, func(r dptypes.PortRange) bool {
		first, last, ok := span(r, protocol)
		return ok && first <= port && port <= last
	})
}

// spans is the ports of protocol that r matches: every port when it names no ports.
func (r Rule) spans(protocol uint8) iter.Seq2[uint16, uint16] {
	return func(yield func(first, last uint16) bool) {
		if len(r.Ports) == 0 {
			yield(dptypes.AllPorts[0], dptypes.AllPorts[1])
			return
		}
		for _, pr := range r.Ports {
			if first, last, ok := span(pr, protocol); ok && !yield(first, last) {
				return
			}
		}
	}
}

// matches says whether r matches a flow with peer.
func (r Rule) matches(peer netip.Addr, protocol uint8, port uint16) bool {
	return slices.ContainsFunc(r.Peers, func(p netip.Prefix) bool { return p.Contains(peer) }) &&
		(len(r.Ports) == 0 || holds(r.Ports, protocol, port))
}
