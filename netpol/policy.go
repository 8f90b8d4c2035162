package netpol

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// policy is a NetworkPolicy parsed once: selectors built, ports and prefixes checked.
type policy struct {
	key      podKey
	selector labels.Selector
	// ingress/egress: the policy isolates the pods it selects in that direction (policyTypes).
	ingress, egress bool
	ingressRules    []*rule
	egressRules     []*rule
	// spec is the NetworkPolicy's spec: the Compiler ignores an update that leaves it as it was.
	spec networkingv1.NetworkPolicySpec
}

// rule is one ingress or egress rule.
type rule struct {
	// everyone: an empty from/to, every peer.
	everyone bool
	peers    []*peer
	// ports: the rule's ports by number (anyPorts when it lists none); named: its ports by name.
	ports portSet
	named []portName
}

// peer is one entry of a rule's from/to: pods (by namespace and pod selector) or an ipBlock.
type peer struct {
	policy *policy
	// Pods: namespaces nil means the policy's own namespace.
	pods       bool
	namespaces labels.Selector
	podSel     labels.Selector
	// ipBlock.
	block  netip.Prefix
	except []netip.Prefix
	// members are the pods a pod peer matches, kept by the Compiler (Compile does not use them).
	members *memberSet
}

func parsePolicy(np *networkingv1.NetworkPolicy) *policy {
	// Fail closed: a policy whose podSelector does not parse isolates every pod of its namespace, and a
	// peer whose selector does not parse matches no pod.
	p := &policy{key: podKey{np.Namespace, np.Name}, selector: selector(&np.Spec.PodSelector, labels.Everything()), spec: np.Spec}
	hasEgress := len(np.Spec.Egress) > 0
	if len(np.Spec.PolicyTypes) == 0 {
		p.ingress, p.egress = true, hasEgress
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			p.ingress = true
		case networkingv1.PolicyTypeEgress:
			p.egress = true
		}
	}
	if p.ingress {
		for _, r := range np.Spec.Ingress {
			p.ingressRules = append(p.ingressRules, p.parseRule(r.From, r.Ports))
		}
	}
	if p.egress {
		for _, r := range np.Spec.Egress {
			p.egressRules = append(p.egressRules, p.parseRule(r.To, r.Ports))
		}
	}
	return p
}

func (p *policy) parseRule(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) *rule {
	r := &rule{everyone: len(peers) == 0}
	for _, np := range peers {
		r.peers = append(r.peers, p.parsePeer(np))
	}
	if len(ports) == 0 {
		r.ports = anyPorts
		return r
	}
	var numbered portSet
	for _, pp := range ports {
		proto, ok := ProtocolNumber(ptrOr(pp.Protocol, corev1.ProtocolTCP))
		if !ok {
			continue // a protocol the datapath cannot tell: the entry allows nothing
		}
		switch {
		case pp.Port == nil:
			numbered = append(numbered, portRange(proto, 0, 65535))
		case pp.Port.Type == intstr.String:
			r.named = append(r.named, portName{pp.Port.StrVal, proto})
		default:
			first := pp.Port.IntVal
			last := ptrOr(pp.EndPort, first)
			if first < 1 || first > 65535 || last < first || last > 65535 {
				continue
			}
			numbered = append(numbered, portRange(proto, uint16(first), uint16(last)))
		}
	}
	r.ports = normalisePorts(numbered)
	return r
}

func (p *policy) parsePeer(np networkingv1.NetworkPolicyPeer) *peer {
	pe := &peer{policy: p}
	switch {
	case np.IPBlock != nil:
		block, err := netip.ParsePrefix(np.IPBlock.CIDR)
		if err != nil {
			return pe // no pods, no block: matches nothing
		}
		pe.block = unmapPrefix(block)
		for _, s := range np.IPBlock.Except {
			e, err := netip.ParsePrefix(s)
			if err != nil {
				continue
			}
			e = unmapPrefix(e)
			if e.Bits() >= pe.block.Bits() && pe.block.Contains(e.Addr()) {
				pe.except = append(pe.except, e)
			}
		}
	case np.PodSelector != nil || np.NamespaceSelector != nil:
		pe.pods = true
		pe.podSel = labels.Everything()
		if np.PodSelector != nil {
			pe.podSel = selector(np.PodSelector, labels.Nothing())
		}
		if np.NamespaceSelector != nil {
			pe.namespaces = selector(np.NamespaceSelector, labels.Nothing())
		}
	}
	return pe
}

// matches says whether the pod, in a namespace with the labels given, is one of the peer's pods.
func (pe *peer) matches(p *pod, nsLabels labels.Set) bool {
	if !pe.pods || !p.peer {
		return false
	}
	return pe.matchesNamespace(p.key.namespace, nsLabels) && pe.podSel.Matches(p.labels)
}

func (pe *peer) matchesNamespace(ns string, nsLabels labels.Set) bool {
	if pe.namespaces == nil {
		return ns == pe.policy.key.namespace
	}
	return pe.namespaces.Matches(nsLabels)
}

// selects says whether the policy selects the pod.
func (p *policy) selects(q *pod) bool {
	return q.key.namespace == p.key.namespace && p.selector.Matches(q.labels)
}

// podPeers calls f for each pod peer of the policy's rules.
func (p *policy) podPeers(f func(*peer)) {
	for _, rs := range [][]*rule{p.ingressRules, p.egressRules} {
		for _, r := range rs {
			for _, pe := range r.peers {
				if pe.pods {
					f(pe)
				}
			}
		}
	}
}

// watchedPorts are the ports by name of the policy's egress rules towards every peer or an ipBlock: they
// resolve on whichever pods have a port of that name, not on the members of a pod peer.
func (p *policy) watchedPorts() []portName {
	var ns []portName
	for _, r := range p.egressRules {
		if len(r.named) == 0 {
			continue
		}
		watch := r.everyone
		for _, pe := range r.peers {
			watch = watch || pe.block.IsValid()
		}
		if watch {
			ns = append(ns, r.named...)
		}
	}
	return ns
}

// selector builds ls, or returns invalid when ls does not parse (the API server refuses such selectors).
func selector(ls *metav1.LabelSelector, invalid labels.Selector) labels.Selector {
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return invalid
	}
	return s
}

// ProtocolNumber is a container port's or NetworkPolicy port's protocol as an IP protocol number (TCP when
// empty); false for one eniwire does not know.
func ProtocolNumber(p corev1.Protocol) (uint8, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return 6, true
	case corev1.ProtocolUDP:
		return 17, true
	case corev1.ProtocolSCTP:
		return 132, true
	}
	return 0, false
}

func portRange(proto uint8, first, last uint16) dptypes.PortRange {
	return dptypes.PortRange{Protocol: proto, First: first, Last: last}
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	bits := p.Bits()
	if a.Is4In6() {
		a, bits = a.Unmap(), max(bits-96, 0)
	}
	return netip.PrefixFrom(a, bits).Masked()
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
