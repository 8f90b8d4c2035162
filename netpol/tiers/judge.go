package tiers

import (
	"net/netip"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Tier is where a flow was decided.
type Tier uint8

const (
	// Admin: an Accept or Deny rule of the Admin tier.
	Admin Tier = iota
	// NetworkPolicy: the pod is isolated in the direction, and its NetworkPolicy entries allow the flow
	// or do not.
	NetworkPolicy
	// Baseline: an Accept or Deny rule of the Baseline tier.
	Baseline
	// Default: nothing decided; the flow is allowed.
	Default
)

func (t Tier) String() string {
	switch t {
	case Admin:
		return "Admin"
	case NetworkPolicy:
		return "NetworkPolicy"
	case Baseline:
		return "Baseline"
	}
	return "Default"
}

// Decision is the verdict on one flow and how it was reached.
type Decision struct {
	Allowed bool
	Tier    Tier
	// Rule is the Admin or Baseline rule that decided; nil when the NetworkPolicy tier or the default did.
	Rule *RuleRef
	// NetworkPolicyEntry is, when the NetworkPolicy tier decided, the prefix of the entry whose ports were read; not
	// valid when no entry contains the peer (and the flow was denied for it).
	NetworkPolicyEntry netip.Prefix
	// Passed are the Pass rules that sent the flow on, the Admin tier's first, then the Baseline tier's.
	Passed []RuleRef
}

// Judge decides one flow of the direction: the peer (source for ingress, destination for egress), the IP
// protocol and the port (the pod's for ingress, the peer's for egress; ignored for a protocol without
// ports). It is the plain reading of the package doc's evaluation, and the reference for Flatten.
func Judge(d Direction, peer netip.Addr, protocol uint8, port uint16) Decision {
	peer = peer.WithZone("")
	matches := func(r *Rule) bool { return r.matches(peer, protocol, port) }
	var dec Decision
	if r := decide(ordered(d.Admin), matches); r != nil {
		if r.Action != Pass {
			return ruled(dec, Admin, r)
		}
		dec.Passed = append(dec.Passed, r.Ref())
	}
	if d.Isolated {
		dec.Tier = NetworkPolicy
		if e, ok := longestEntry(d.NetworkPolicy, peer); ok {
			dec.NetworkPolicyEntry, dec.Allowed = e.Peer, holds(e.Ports, protocol, port)
		}
		return dec
	}
	if r := decide(ordered(d.Baseline), matches); r != nil {
		if r.Action != Pass {
			return ruled(dec, Baseline, r)
		}
		dec.Passed = append(dec.Passed, r.Ref())
	}
	dec.Tier, dec.Allowed = Default, true
	return dec
}

// ruled is dec decided by an Accept or Deny rule of tier t.
func ruled(dec Decision, t Tier, r *Rule) Decision {
	ref := r.Ref()
	dec.Tier, dec.Rule, dec.Allowed = t, &ref, r.Action == Accept
	return dec
}

// decide is the rule of a tier (its ordered rules) that decides a flow, or nil when none matches it: at
// the first priority where some policy has a rule that matches, each such policy's first matching rule,
// the most restrictive of them, the first policy by name among equals.
func decide(rules []Rule, matches func(*Rule) bool) *Rule {
	for priority := range runs(rules, samePriority) {
		var best *Rule
		for policy := range runs(priority, samePolicy) {
			for i := range policy {
				if r := &policy[i]; matches(r) {
					if best == nil || r.Action.restrictiveness() > best.Action.restrictiveness() {
						best = r
					}
					break
				}
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// longestEntry is the entry of the longest prefix that contains peer, the first of equal prefixes.
func longestEntry(entries []dptypes.PeerPorts, peer netip.Addr) (dptypes.PeerPorts, bool) {
	best, found := dptypes.PeerPorts{}, false
	for _, e := range entries {
		if e.Peer.Contains(peer) && (!found || e.Peer.Bits() > best.Peer.Bits()) {
			best, found = e, true
		}
	}
	return best, found
}
