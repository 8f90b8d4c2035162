package cnp

import (
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// subject reads spec.subject: exactly one of namespaces and pods. A subject that sets neither, a field of a
// newer CRD among them, is refused: the API defines no failing closed for a subject, and a guess at the pods
// it means would isolate or free pods it does not.
func (r *reading) subject(v any, at *field.Path) PodSelection {
	obj, ok := r.object(v, at)
	if !ok {
		return PodSelection{}
	}
	switch one, _ := r.exactlyOne(obj, at, "namespaces", "pods"); one {
	case "namespaces":
		return r.namespaces(obj[one], at.Child(one))
	case "pods":
		return r.pods(obj[one], at.Child(one))
	}
	return PodSelection{}
}

// peer reads a peer's one field, of the kind given.
func (r *reading) peer(kind PeerKind, v any, at *field.Path) Peer {
	pe := Peer{Kind: kind}
	switch kind {
	case PeerNamespaces:
		pe.PodSelection = r.namespaces(v, at)
	case PeerPods:
		pe.PodSelection = r.pods(v, at)
	case PeerNodes:
		pe.Nodes, _ = r.selector(v, at)
	case PeerNetworks:
		pe.Networks = r.networks(v, at)
	}
	return pe
}

// namespaces reads a namespace selector: every pod of the namespaces it matches.
func (r *reading) namespaces(v any, at *field.Path) PodSelection {
	ns, _ := r.selector(v, at)
	return PodSelection{Namespaces: ns, Pods: labels.Everything()}
}

// pods reads a NamespacedPod: podSelector is required, namespaceSelector is not, and every namespace
// when omitted.
func (r *reading) pods(v any, at *field.Path) PodSelection {
	obj, ok := r.object(v, at)
	if !ok {
		return PodSelection{}
	}
	s := PodSelection{Namespaces: labels.Everything()}
	if v, ok := r.get(obj, at, "namespaceSelector", false); ok {
		s.Namespaces, _ = r.selector(v, at.Child("namespaceSelector"))
	}
	if v, ok := r.get(obj, at, "podSelector", true); ok {
		s.Pods, _ = r.selector(v, at.Child("podSelector"))
	}
	return s
}

// networks reads a networks peer's CIDRs as the API server checks them: each a prefix with no bits set
// past its length, not IPv4-mapped IPv6, none given twice. Two spellings of one prefix (::/0, 0::/0) are
// kept once.
func (r *reading) networks(v any, at *field.Path) []netip.Prefix {
	l, ok := r.boundedList(v, at, true, maxNetworks)
	if !ok {
		return nil
	}
	var given []string
	var prefixes []netip.Prefix
	for k, cv := range l {
		cat := at.Index(k)
		s, ok := r.text(cv, cat)
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			r.refuse(field.Invalid(cat, s, "not a CIDR: "+err.Error()))
		case p.Addr().Is4In6():
			r.refuse(field.Invalid(cat, s, "an IPv4-mapped IPv6 prefix: give the IPv4 prefix"))
		case p != p.Masked():
			r.refuse(field.Invalid(cat, s, "has address bits set past its length; the network is "+p.Masked().String()))
		case slices.Contains(given, s):
			r.refuse(field.Duplicate(cat, s))
		case !slices.Contains(prefixes, p):
			prefixes = append(prefixes, p)
		}
		given = append(given, s)
	}
	return prefixes
}
