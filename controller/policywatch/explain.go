package policywatch

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// flowSpec is the flow `eniwirectl policy POD --explain` asks about, in the form
//
//	from|to ADDRESS [PROTOCOL[/PORT]]
//
// "from 10.0.1.5 tcp/8080": a flow the peer 10.0.1.5 opens to the pod's TCP port 8080 (ingress); "to
// 10.0.2.9 udp/53": one the pod opens to the peer's UDP port 53 (egress). PROTOCOL is tcp, udp, sctp or icmp
// (ICMP has no port; only a rule without ports allows it); without one, tcp; a protocol without a port
// asks about any port of it (a rule must allow them all).
type flowSpec struct {
	egress bool
	peer   netip.Addr
	proto  uint8
	// first, last: the ports asked about.
	first, last uint16
}

var protocols = map[string]uint8{"tcp": 6, "udp": 17, "sctp": 132, "icmp": 1}

func parseFlow(s string) (flowSpec, error) {
	bad := func(why string) (flowSpec, error) {
		return flowSpec{}, fmt.Errorf("flow %q: %s (want: from|to ADDRESS [tcp|udp|sctp|icmp[/PORT]], e.g. 'from 10.0.1.5 tcp/8080')", s, why)
	}
	fields := strings.Fields(s)
	if len(fields) < 2 || len(fields) > 3 {
		return bad("two or three words")
	}
	var f flowSpec
	switch fields[0] {
	case "from":
	case "to":
		f.egress = true
	default:
		return bad("the first word is from or to")
	}
	var err error
	if f.peer, err = netip.ParseAddr(fields[1]); err != nil {
		return bad(err.Error())
	}
	f.peer = f.peer.Unmap()
	f.proto, f.first, f.last = 6, dptypes.AllPorts[0], dptypes.AllPorts[1]
	if len(fields) == 3 {
		name, port, hasPort := strings.Cut(strings.ToLower(fields[2]), "/")
		p, ok := protocols[name]
		if !ok {
			return bad("unknown protocol " + name)
		}
		f.proto = p
		if hasPort {
			if p == 1 {
				return bad("icmp has no port")
			}
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil || n == 0 {
				return bad("port " + port + " is not 1-65535")
			}
			f.first, f.last = uint16(n), uint16(n)
		}
	}
	return f, nil
}

// allows says whether a direction's entries allow the flow: the entry of the longest prefix holding the
// peer (the only one the datapath consults) must have a range of the flow's protocol covering its ports,
// or allow any protocol. It returns that entry too (nil when none holds the peer).
func (f flowSpec) allows(entries []dptypes.PeerPorts) (*dptypes.PeerPorts, bool) {
	var best *dptypes.PeerPorts
	for i, e := range entries {
		if e.Peer.Contains(f.peer) && (best == nil || e.Peer.Bits() > best.Peer.Bits()) {
			best = &entries[i]
		}
	}
	if best == nil {
		return nil, false
	}
	for _, r := range best.Ports {
		if r.Protocol == dptypes.AnyProtocol || (r.Protocol == f.proto && f.proto != 1 && r.First <= f.first && f.last <= r.Last) {
			return best, true
		}
	}
	return best, false
}

// explain answers flow for the pod at address a, whose compiled state is pp and whose isolating policies
// are policies; failure is why its state could not be written, if so. mu held.
func (w *Watcher) explain(f flowSpec, flow string, a netip.Addr, pp dptypes.PodPolicy, policies []string, failure string) *api.PolicyExplanation {
	out := &api.PolicyExplanation{Flow: flow}
	dir, isolated, entries := "ingress", pp.IngressIsolated, pp.Ingress
	if f.egress {
		dir, isolated, entries = "egress", pp.EgressIsolated, pp.Egress
	}
	if failure != "" {
		out.Reason = fmt.Sprintf("denied: the pod's policy could not be written, so it allows nothing (%s)", failure)
		return out
	}
	if !isolated {
		out.Allowed = true
		out.Reason = fmt.Sprintf("allowed: no policy with policyTypes %s selects the pod, so its %s is not isolated", strings.ToUpper(dir[:1])+dir[1:], dir)
		return out
	}
	entry, ok := f.allows(entries)
	if ok {
		out.Allowed = true
		for _, name := range policies {
			alone := w.alone(name)[a]
			ents := alone.Ingress
			if f.egress {
				ents = alone.Egress
			}
			if _, yes := f.allows(ents); yes {
				out.AllowedBy = append(out.AllowedBy, name)
			}
		}
		out.Reason = fmt.Sprintf("allowed by %s: its %s rules allow %s (entry %s: %s)", strings.Join(out.AllowedBy, ", "), dir, f.peer, entry.Peer, portList(entry.Ports))
		return out
	}
	switch {
	case entry == nil:
		out.Reason = fmt.Sprintf("denied: %s is isolated by %s, and no rule of theirs names a peer that holds %s", dir, strings.Join(policies, ", "), f.peer)
	case len(entry.Ports) == 0:
		out.Reason = fmt.Sprintf("denied: %s is isolated by %s, and %s falls in an except (%s) of their rules", dir, strings.Join(policies, ", "), f.peer, entry.Peer)
	default:
		out.Reason = fmt.Sprintf("denied: %s is isolated by %s; their rules allow %s only %s (entry %s), not %s", dir, strings.Join(policies, ", "), f.peer, portList(entry.Ports), entry.Peer, f.portString())
	}
	return out
}

func (f flowSpec) portString() string {
	return portString(dptypes.PortRange{Protocol: f.proto, First: f.first, Last: f.last})
}

func portList(rs []dptypes.PortRange) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = portString(r)
	}
	return strings.Join(s, ", ")
}

// portString is a range as eniwirectl prints it: tcp/80, udp/1000-2000, sctp (every port), any.
func portString(r dptypes.PortRange) string {
	name := strconv.Itoa(int(r.Protocol))
	for n, p := range protocols {
		if p == r.Protocol {
			name = n
		}
	}
	switch {
	case r.Protocol == dptypes.AnyProtocol:
		return "any"
	case r.Protocol == 1 || (r.First == dptypes.AllPorts[0] && r.Last == dptypes.AllPorts[1]):
		return name
	case r.First == r.Last:
		return fmt.Sprintf("%s/%d", name, r.First)
	}
	return fmt.Sprintf("%s/%d-%d", name, r.First, r.Last)
}
