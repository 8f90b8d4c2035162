package ec2sim

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// A security group's rules. EC2 keeps them one by one, each with a rule id (sgr-...): one protocol, one
// port range and one peer, a CIDR block or another group. Requests and describes group them as
// IpPermissions (one protocol and port range, many peers); Permission is that shape in the Go API.

// The protocols of a rule as EC2 names them. Any other protocol is its IANA number; ProtocolAll is every
// protocol and every port.
const (
	ProtocolTCP    = "tcp"
	ProtocolUDP    = "udp"
	ProtocolICMP   = "icmp"
	ProtocolICMPv6 = "icmpv6"
	ProtocolAll    = "-1"
)

// Permission is one IpPermission: a protocol, its port range and the peers it admits, the sources of an
// ingress rule or the destinations of an egress rule.
type Permission struct {
	// Protocol is ProtocolTCP, ProtocolUDP, ProtocolICMP, ProtocolICMPv6, ProtocolAll or a protocol number.
	Protocol string `json:"protocol"`
	// FromPort and ToPort are the port range of tcp and udp, the ICMP type and code of icmp and icmpv6 (-1:
	// every type or code); other protocols have no ports and leave both 0.
	FromPort int `json:"fromPort,omitempty"`
	ToPort   int `json:"toPort,omitempty"`
	// CIDRs are IPv4 and IPv6 blocks.
	CIDRs []string `json:"cidrs,omitempty"`
	// Groups are security group ids: the private addresses and prefixes of every ENI that carries one.
	Groups []string `json:"groups,omitempty"`
}

// AllTraffic is the permission of every protocol to and from every IPv4 and IPv6 address.
func AllTraffic() []Permission {
	return []Permission{{Protocol: ProtocolAll, CIDRs: []string{"0.0.0.0/0", "::/0"}}}
}

// rule is one rule of a group as EC2 keeps it. Exactly one of CIDR and Group is the peer.
type rule struct {
	ID               string
	Egress           bool
	Protocol         string
	FromPort, ToPort int
	CIDR             netip.Prefix
	Group            string
	Description      string
	Tags             map[string]string
}

// ruleMatch is what makes two rules the same rule: EC2 refuses to authorize it twice and revokes by it.
type ruleMatch struct {
	egress           bool
	protocol         string
	fromPort, toPort int
	cidr             netip.Prefix
	group            string
}

func (r rule) match() ruleMatch {
	return ruleMatch{egress: r.Egress, protocol: r.Protocol, fromPort: r.FromPort, toPort: r.ToPort, cidr: r.CIDR, group: r.Group}
}

func (r rule) peer() string {
	if r.CIDR.IsValid() {
		return r.CIDR.String()
	}
	return r.Group
}

// hasPorts reports whether a protocol's rules carry a port range (or ICMP type and code).
func hasPorts(protocol string) bool {
	switch protocol {
	case ProtocolTCP, ProtocolUDP, ProtocolICMP, ProtocolICMPv6:
		return true
	}
	return false
}

// text is how EC2 names a rule in InvalidPermission.Duplicate (`peer: 0.0.0.0/0, TCP, from port: 22, to
// port: 22, ALLOW`, `peer: sg-..., ALL, ALLOW`, as seen in the field).
func (r rule) text() string {
	switch {
	case r.Protocol == ProtocolAll:
		return fmt.Sprintf("peer: %s, ALL, ALLOW", r.peer())
	case hasPorts(r.Protocol):
		return fmt.Sprintf("peer: %s, %s, from port: %d, to port: %d, ALLOW", r.peer(), strings.ToUpper(r.Protocol), r.FromPort, r.ToPort)
	}
	return fmt.Sprintf("peer: %s, %s, ALLOW", r.peer(), r.Protocol)
}

// permissionAsk is one IpPermission as a request (or the Go API) states it, before validation.
type permissionAsk struct {
	protocol string
	fromPort *int // nil: not given
	toPort   *int
	cidrs4   []peerAsk
	cidrs6   []peerAsk
	groups   []peerAsk
	// groupNames are peers named by group name, which only a default VPC resolves.
	groupNames []string
}

type peerAsk struct{ value, description string }

// askOf is a Go API Permission as an ask.
func askOf(p Permission) permissionAsk {
	a := permissionAsk{protocol: p.Protocol, fromPort: &p.FromPort, toPort: &p.ToPort}
	for _, c := range p.CIDRs {
		if strings.Contains(c, ":") {
			a.cidrs6 = append(a.cidrs6, peerAsk{value: c})
		} else {
			a.cidrs4 = append(a.cidrs4, peerAsk{value: c})
		}
	}
	for _, g := range p.Groups {
		a.groups = append(a.groups, peerAsk{value: g})
	}
	return a
}

// rulesOfLocked validates an ask for group g and returns its rules, one per peer, without ids.
func (s *Sim) rulesOfLocked(g *secGroup, egress bool, a permissionAsk) ([]rule, *APIError) {
	protocol, err := normalizeProtocol(a.protocol)
	if err != nil {
		return nil, err
	}
	from, to, err := portRange(protocol, a.fromPort, a.toPort)
	if err != nil {
		return nil, err
	}
	if len(a.groupNames) > 0 {
		return nil, errGroupNameOutsideDefaultVPC(a.groupNames[0])
	}
	if len(a.cidrs4)+len(a.cidrs6)+len(a.groups) == 0 {
		side := "source"
		if egress {
			side = "destination"
		}
		return nil, apiErr(CodeMissingParameter, "Missing %s specification: include %s security group or CIDR information", side, side)
	}
	base := rule{Egress: egress, Protocol: protocol, FromPort: from, ToPort: to}
	var out []rule
	for _, c := range a.cidrs4 {
		p, err := parseRuleCIDR(c.value, "cidrIp", true)
		if err != nil {
			return nil, err
		}
		r := base
		r.CIDR, r.Description = p, c.description
		out = append(out, r)
	}
	for _, c := range a.cidrs6 {
		p, err := parseRuleCIDR(c.value, "cidrIpv6", false)
		if err != nil {
			return nil, err
		}
		r := base
		r.CIDR, r.Description = p, c.description
		out = append(out, r)
	}
	for _, peer := range a.groups {
		if e := checkID(reGroup, CodeInvalidGroupIDMalformed, peer.value, "sg"); e != nil {
			return nil, e
		}
		// A group may name itself, also while it is being added.
		if peer.value != g.ID {
			switch pg := s.groups[peer.value]; {
			case pg == nil:
				return nil, errGroupNotFound(peer.value)
			case pg.VPCID != g.VPCID:
				return nil, errGroupNotInVPC(peer.value, g.VPCID)
			}
		}
		r := base
		r.Group, r.Description = peer.value, peer.description
		out = append(out, r)
	}
	return out, nil
}

// normalizeProtocol reads a rule's protocol: a name, -1, or a number 0-255; the numbers of tcp, udp, icmp
// and icmpv6 are kept as those names, as the same rule either way.
func normalizeProtocol(p string) (string, *APIError) {
	switch v := strings.ToLower(strings.TrimSpace(p)); v {
	case ProtocolTCP, "6":
		return ProtocolTCP, nil
	case ProtocolUDP, "17":
		return ProtocolUDP, nil
	case ProtocolICMP, "1":
		return ProtocolICMP, nil
	case ProtocolICMPv6, "58":
		return ProtocolICMPv6, nil
	case ProtocolAll:
		return ProtocolAll, nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 255 {
		return "", apiErr(CodeInvalidParameterValue, "Invalid value '%s' for IP protocol. Unknown protocol.", clip(p))
	}
	return strconv.Itoa(n), nil
}

// portRange checks a rule's ports for its protocol: tcp and udp need both (-1 and -1 is every port, as the
// AWS CLI's --port all sends it), icmp needs a type and a code (-1: all), icmpv6 takes them optionally;
// other protocols ignore them. The missing-port text is EC2's; out-of-range ports are
// InvalidPermission.Malformed as seen in the field (boto3#336).
func portRange(protocol string, from, to *int) (int, int, *APIError) {
	switch protocol {
	case ProtocolTCP, ProtocolUDP:
		if from == nil || to == nil {
			return 0, 0, apiErr(CodeInvalidParameterValue, "Invalid value 'Must specify both from and to ports with TCP/UDP.' for portRange.")
		}
		f, t := *from, *to
		if f == -1 && t == -1 {
			return 0, 65535, nil
		}
		for _, p := range []int{f, t} {
			if p < 0 || p > 65535 {
				return 0, 0, apiErr(CodeInvalidPermissionMalformed, "TCP/UDP port (%d) out of range", p)
			}
		}
		if f > t {
			return 0, 0, apiErr(CodeInvalidParameterValue, "Invalid value '%d-%d' for portRange. The from port must not be greater than the to port.", f, t)
		}
		return f, t, nil
	case ProtocolICMP, ProtocolICMPv6:
		name := "ICMP"
		if protocol == ProtocolICMPv6 {
			name = "ICMPv6"
			if from == nil && to == nil {
				return -1, -1, nil
			}
		}
		if from == nil || to == nil {
			return 0, 0, apiErr(CodeInvalidParameterValue, "Invalid value 'Must specify both from and to ports with %s.' for portRange.", name)
		}
		typ, code := *from, *to
		if typ < -1 || typ > 255 {
			return 0, 0, apiErr(CodeInvalidPermissionMalformed, "%s type (%d) out of range", name, typ)
		}
		if code < -1 || code > 255 {
			return 0, 0, apiErr(CodeInvalidPermissionMalformed, "%s code (%d) out of range", name, code)
		}
		if typ == -1 && code != -1 {
			return 0, 0, apiErr(CodeInvalidParameterValue, "Invalid value '%d' for %s code. Every %s type (-1) takes every code (-1).", code, name, name)
		}
		return typ, code, nil
	}
	return 0, 0, nil
}

// parseRuleCIDR reads a rule's CIDR of one family; host bits are cleared, as EC2 stores them.
func parseRuleCIDR(v, param string, ipv4 bool) (netip.Prefix, *APIError) {
	p, err := netip.ParsePrefix(strings.TrimSpace(v))
	if err != nil || p.Addr().Is4() != ipv4 || p.Addr().Zone() != "" {
		kind := "CIDR block"
		if !ipv4 {
			kind = "IPv6 CIDR block"
		}
		return netip.Prefix{}, apiErr(CodeInvalidParameterValue, "Value (%s) for parameter %s is invalid. This is not a valid %s.", clip(v), param, kind)
	}
	return p.Masked(), nil
}

// ruleSet is a group's rules of one direction grouped as IpPermissions: by protocol and port range, in
// the order they were first authorized.
type ruleSet struct {
	protocol         string
	fromPort, toPort int
	rules            []rule
}

func groupRules(rules []rule, egress bool) []ruleSet {
	var out []ruleSet
	for _, r := range rules {
		if r.Egress != egress {
			continue
		}
		i := slices.IndexFunc(out, func(rs ruleSet) bool {
			return rs.protocol == r.Protocol && rs.fromPort == r.FromPort && rs.toPort == r.ToPort
		})
		if i < 0 {
			out = append(out, ruleSet{protocol: r.Protocol, fromPort: r.FromPort, toPort: r.ToPort})
			i = len(out) - 1
		}
		out[i].rules = append(out[i].rules, r)
	}
	return out
}

// permissionsOf is one direction of a group's rules as Permissions: IPv4 blocks, then IPv6 blocks, then
// groups, each in the order authorized.
func permissionsOf(rules []rule, egress bool) []Permission {
	out := []Permission{}
	for _, rs := range groupRules(rules, egress) {
		p := Permission{Protocol: rs.protocol, FromPort: rs.fromPort, ToPort: rs.toPort}
		for _, want4 := range []bool{true, false} {
			for _, r := range rs.rules {
				if r.CIDR.IsValid() && r.CIDR.Addr().Is4() == want4 {
					p.CIDRs = append(p.CIDRs, r.CIDR.String())
				}
			}
		}
		for _, r := range rs.rules {
			if r.Group != "" {
				p.Groups = append(p.Groups, r.Group)
			}
		}
		out = append(out, p)
	}
	return out
}
