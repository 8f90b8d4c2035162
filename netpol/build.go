package netpol

import (
	"net/netip"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// peerSource answers the two questions about the cluster's pods that compiling a pod asks. The Compiler
// answers from its indexes, the reference Compile by scanning every pod; both return only peer pods.
type peerSource interface {
	// members calls f for each address of each pod that the pod peer pe matches.
	members(pe *peer, f func(netip.Addr, *pod))
	// named calls f for each pod with a port named n.
	named(n portName, f func(*pod))
}

// scratch is the working memory of podPolicy, kept between calls: a compile allocates only what it
// returns.
type scratch struct {
	in, eg []grant
	marks  []mark
	out    []dptypes.PeerPorts
}

// podPolicy compiles the state of local pod q, which the policies pols select (in any order).
func podPolicy(q *pod, pols []*policy, src peerSource, s *scratch) dptypes.PodPolicy {
	var out dptypes.PodPolicy
	in, eg := s.in[:0], s.eg[:0]
	for _, p := range pols {
		if p.ingress {
			out.IngressIsolated = true
			for _, r := range p.ingressRules {
				in = ingressGrants(in, q, r, src)
			}
		}
		if p.egress {
			out.EgressIsolated = true
			for _, r := range p.egressRules {
				eg = egressGrants(eg, r, src)
			}
		}
	}
	out.Ingress, out.Egress = fold(in, s), fold(eg, s)
	s.in, s.eg = in, eg
	return out
}

// ingressGrants adds what ingress rule r allows into pod q: its ports by name resolve on q itself.
func ingressGrants(gs []grant, q *pod, r *rule, src peerSource) []grant {
	ports := r.ports
	if len(r.named) > 0 {
		var resolved portSet
		for _, n := range r.named {
			if port, ok := q.resolve(n); ok {
				resolved = append(resolved, portRange(n.proto, port, port))
			}
		}
		ports = unionPorts(ports, normalisePorts(resolved))
	}
	return ruleGrants(gs, r, ports, src)
}

// egressGrants adds what egress rule r allows out: its ports by number to every peer, its ports by name
// to each peer pod that has a port of that name, at that pod's addresses.
func egressGrants(gs []grant, r *rule, src peerSource) []grant {
	gs = ruleGrants(gs, r, r.ports, src)
	if len(r.named) == 0 {
		return gs
	}
	if r.everyone {
		for _, n := range r.named {
			src.named(n, func(m *pod) { gs = namedGrants(gs, m, n, nil) })
		}
		return gs
	}
	for _, pe := range r.peers {
		if pe.pods {
			src.members(pe, func(a netip.Addr, m *pod) {
				for _, n := range r.named {
					if port, ok := m.resolve(n); ok {
						gs = append(gs, grant{prefix: hostPrefix(a), ports: portSet{portRange(n.proto, port, port)}})
					}
				}
			})
			continue
		}
		if pe.block.IsValid() {
			for _, n := range r.named {
				src.named(n, func(m *pod) { gs = namedGrants(gs, m, n, pe) })
			}
		}
	}
	return gs
}

// namedGrants adds port n of pod m at each of m's addresses (those inside ipBlock peer in, if given).
func namedGrants(gs []grant, m *pod, n portName, in *peer) []grant {
	port, ok := m.resolve(n)
	if !ok {
		return gs
	}
	for _, a := range m.addrs {
		if in != nil && !in.blockHolds(a) {
			continue
		}
		gs = append(gs, grant{prefix: hostPrefix(a), ports: portSet{portRange(n.proto, port, port)}})
	}
	return gs
}

// ruleGrants adds ports to every peer of r.
func ruleGrants(gs []grant, r *rule, ports portSet, src peerSource) []grant {
	if len(ports) == 0 {
		return gs
	}
	if r.everyone {
		for _, p := range everyone {
			gs = append(gs, grant{prefix: p, ports: ports})
		}
		return gs
	}
	for _, pe := range r.peers {
		switch {
		case pe.pods:
			src.members(pe, func(a netip.Addr, _ *pod) {
				gs = append(gs, grant{prefix: hostPrefix(a), ports: ports})
			})
		case pe.block.IsValid():
			gs = append(gs, grant{prefix: pe.block, except: pe.except, ports: ports})
		}
	}
	return gs
}

// blockHolds says whether address a is in ipBlock peer pe and not in its except.
func (pe *peer) blockHolds(a netip.Addr) bool {
	if !pe.block.Contains(a) {
		return false
	}
	for _, e := range pe.except {
		if e.Contains(a) {
			return false
		}
	}
	return true
}
