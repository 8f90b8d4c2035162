package cnp

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// direction is what differs between ingress and egress rules.
type direction struct {
	peers string // the rule's field of peers
	// fields are the peer fields the API has; unimplemented are those of them eniwire does not apply, so that
	// a peer setting one fails closed like a peer of a newer CRD.
	fields, unimplemented []string
}

var (
	ingress = direction{peers: "from", fields: []string{"namespaces", "pods"}}
	egress  = direction{
		peers:         "to",
		fields:        []string{"namespaces", "pods", "nodes", "networks", "domainNames"},
		unimplemented: []string{"domainNames"}, // would need the names the pods resolve, which eniwire does not follow
	}
)

// addressPeers are the egress peer fields whose peers are addresses, which have no ports by name.
var addressPeers = []string{"nodes", "networks", "domainNames"}

// rule reads one rule at at: name, action, peers and protocols.
func (r *reading) rule(v any, at *field.Path, d direction) Rule {
	var rule Rule
	obj, ok := r.object(v, at)
	if !ok {
		return rule
	}
	if v, ok := r.get(obj, at, "name", false); ok {
		if name, ok := r.text(v, at.Child("name")); ok {
			if len(name) > maxRuleName {
				r.refuse(field.TooLong(at.Child("name"), name, maxRuleName))
			}
			rule.Name = name
		}
	}
	rule.Action, _ = enum(r, obj, at, "action", Accept, Deny, Pass)
	addressPeer := r.rulePeers(&rule, obj, at, d)
	if v, ok := r.get(obj, at, "protocols", false); ok {
		rule.Ports = r.ports(v, at.Child("protocols"))
	}
	if addressPeer != nil {
		for k, p := range rule.Ports {
			if p.Named() {
				r.refuse(field.Forbidden(at.Child("protocols").Index(k).Child("destinationNamedPort"),
					"a port by name cannot be matched on "+addressPeer.String()+", which selects addresses, not pods"))
			}
		}
	}
	return rule
}

// rulePeers reads the rule's peers into rule, and returns the path of its first peer that selects addresses,
// nil if none does. A peer that sets no field eniwire applies makes the rule fail closed, as the API asks.
func (r *reading) rulePeers(rule *Rule, obj map[string]any, at *field.Path, d direction) (addressPeer *field.Path) {
	v, ok := r.get(obj, at, d.peers, true)
	if !ok {
		return nil
	}
	at = at.Child(d.peers)
	l, ok := r.boundedList(v, at, true, maxPeers)
	if !ok {
		return nil
	}
	for j, pv := range l {
		pat := at.Index(j)
		obj, ok := r.object(pv, pat)
		if !ok {
			continue
		}
		one, unknown, ok := r.union(obj, pat, d.fields...)
		switch {
		case !ok:
			continue
		case one == "":
			why := "it sets no peer field eniwire knows"
			if len(unknown) > 0 {
				why = "eniwire knows no peer field " + strings.Join(unknown, ", ")
			}
			r.failClosed(rule, pat, why)
		case slices.Contains(d.unimplemented, one):
			r.failClosed(rule, pat, "eniwire does not implement "+one+" peers")
		default:
			rule.Peers = append(rule.Peers, r.peer(PeerKind(one), obj[one], pat.Child(one)))
		}
		if addressPeer == nil && slices.Contains(addressPeers, one) {
			addressPeer = pat.Child(one)
		}
	}
	return addressPeer
}

// failClosed marks the rule as failing closed because of its peer at at, and says so.
func (r *reading) failClosed(rule *Rule, at *field.Path, why string) {
	rule.FailClosed = true
	effect := "the rule matches no traffic"
	if rule.Action != Accept {
		effect = "the " + string(rule.Action) + " rule denies all traffic of its direction"
	}
	r.warn(at, "%s; failing closed, %s", why, effect)
}
