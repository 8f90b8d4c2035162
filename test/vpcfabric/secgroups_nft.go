package vpcfabric

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// The nftables objects that state the security groups, in the table inet secgroups of the vpc netns:
//
//	egress, ingress    base chains on the forward hook: an established or related packet is accepted, any
//	                   other goes through a verdict map keyed by the router link it came in on (egress)
//	                   and then by the one it leaves by (ingress), to the chain of that carrier. An accept
//	                   ends only its own base chain, so a packet the sender's egress admits still meets the
//	                   receiver's ingress; a drop is final. Per packet that is one map lookup per direction,
//	                   whatever the number of ENIs.
//	from_<link>        a carrier's egress: a jump to the egress chain of each of its groups, then a drop
//	to_<link>          counted in the named counter drops_<link>; its ingress likewise.
//	sg_<group>_egress  a group's rules, each an accept (the same chains serve every ENI of the group).
//	sg_<group>_ingress
//	sg_<group>_v4/_v6  the addresses of every carrier of a group that a rule names.

const sgTable = "secgroups"

const sgSkeleton = `table inet ` + sgTable + ` {
	map egress_of { type ifname : verdict; }
	map ingress_of { type ifname : verdict; }
	chain egress {
		type filter hook forward priority filter + 10; policy accept;
		ct state established,related accept
		iifname vmap @egress_of
	}
	chain ingress {
		type filter hook forward priority filter + 20; policy accept;
		ct state established,related accept
		oifname vmap @ingress_of
	}
}
`

func dropCounter(link string) string { return "drops_" + link }

func groupChain(group string, egress bool) string {
	if egress {
		return "sg_" + group + "_egress"
	}
	return "sg_" + group + "_ingress"
}

func groupSet(group string, ipv4 bool) string {
	if ipv4 {
		return "sg_" + group + "_v4"
	}
	return "sg_" + group + "_v6"
}

// nftState is what the fabric writes into the table beside its skeleton.
type nftState struct {
	counters  map[string]bool
	sets      map[string]nftSet   // name -> type and elements
	chains    map[string][]string // name -> rules
	egressOf  map[string]string   // router link -> chain (the verdict map egress_of)
	ingressOf map[string]string
}

type nftSet struct {
	typ      string // ipv4_addr, ipv6_addr
	elements []string
}

func emptyNFTState() nftState {
	return nftState{counters: map[string]bool{}, sets: map[string]nftSet{}, chains: map[string][]string{},
		egressOf: map[string]string{}, ingressOf: map[string]string{}}
}

// groupChains lists the chains of groups (for the log).
func (s nftState) groupChains() []string {
	var out []string
	for name := range s.chains {
		if strings.HasPrefix(name, "sg_") {
			out = append(out, name)
		}
	}
	return out
}

// desiredNFTState is the table's content for these carriers and rules.
func desiredNFTState(carriers []carrier, rules map[string]ec2sim.SecurityGroupRules) nftState {
	s := emptyNFTState()
	members := map[string][]netip.Prefix{} // group -> addresses of its carriers
	for _, c := range carriers {
		counter := dropCounter(c.link)
		s.counters[counter] = true
		for _, egress := range []bool{true, false} {
			var chain []string
			for _, g := range c.groups {
				chain = append(chain, "jump "+groupChain(g, egress))
			}
			chain = append(chain, "counter name "+counter+" drop")
			if egress {
				s.chains["from_"+c.link] = chain
				s.egressOf[c.link] = "from_" + c.link
			} else {
				s.chains["to_"+c.link] = chain
				s.ingressOf[c.link] = "to_" + c.link
			}
		}
		for _, g := range c.groups {
			members[g] = append(members[g], c.addrs...)
		}
	}
	named := map[string]bool{} // groups a rule names
	for g := range members {
		r := rules[g]
		for _, dir := range []struct {
			egress bool
			perms  []ec2sim.Permission
		}{{false, r.Ingress}, {true, r.Egress}} {
			var chain []string
			for _, p := range dir.perms {
				chain = append(chain, permissionRules(p, dir.egress)...)
				for _, peer := range p.Groups {
					named[peer] = true
				}
			}
			s.chains[groupChain(g, dir.egress)] = chain
		}
	}
	for g := range named {
		var v4, v6 []string
		for _, a := range members[g] {
			if a.Addr().Is4() {
				v4 = append(v4, a.String())
			} else {
				v6 = append(v6, a.String())
			}
		}
		slices.Sort(v4)
		slices.Sort(v6)
		s.sets[groupSet(g, true)] = nftSet{typ: "ipv4_addr", elements: slices.Compact(v4)}
		s.sets[groupSet(g, false)] = nftSet{typ: "ipv6_addr", elements: slices.Compact(v6)}
	}
	return s
}

// permissionRules are the nft rules of one permission: one accept per CIDR, two (IPv4, IPv6) per group.
func permissionRules(p ec2sim.Permission, egress bool) []string {
	dir := "saddr"
	if egress {
		dir = "daddr"
	}
	match := protocolMatch(p)
	var out []string
	for _, c := range p.CIDRs {
		prefix, err := netip.ParsePrefix(c)
		if err != nil {
			continue // the simulator admits no malformed CIDR
		}
		family := "ip"
		if prefix.Addr().Is6() {
			family = "ip6"
		}
		out = append(out, fmt.Sprintf("%s %s %s%s accept", family, dir, prefix, match))
	}
	for _, g := range p.Groups {
		out = append(out, fmt.Sprintf("ip %s @%s%s accept", dir, groupSet(g, true), match),
			fmt.Sprintf("ip6 %s @%s%s accept", dir, groupSet(g, false), match))
	}
	return out
}

// protocolMatch is the part of a rule that matches its protocol and ports (or ICMP type and code).
func protocolMatch(p ec2sim.Permission) string {
	switch p.Protocol {
	case ec2sim.ProtocolAll:
		return ""
	case ec2sim.ProtocolTCP, ec2sim.ProtocolUDP:
		ports := strconv.Itoa(p.FromPort)
		if p.ToPort != p.FromPort {
			ports += "-" + strconv.Itoa(p.ToPort)
		}
		return fmt.Sprintf(" %s dport %s", p.Protocol, ports)
	case ec2sim.ProtocolICMP, ec2sim.ProtocolICMPv6:
		l4, kw := "icmp", "icmp"
		if p.Protocol == ec2sim.ProtocolICMPv6 {
			l4, kw = "ipv6-icmp", "icmpv6"
		}
		switch {
		case p.FromPort == -1:
			return " meta l4proto " + l4
		case p.ToPort == -1:
			return fmt.Sprintf(" %s type %d", kw, p.FromPort)
		}
		return fmt.Sprintf(" %s type %d %s code %d", kw, p.FromPort, kw, p.ToPort)
	}
	return " meta l4proto " + p.Protocol
}

// changesTo is the nft script that turns the table from s into next, in an order every step of which is
// valid: what a rule names exists before the rule, a chain is emptied and out of the verdict maps before it
// is deleted, and a set or counter outlives the rules that name it. Empty when nothing changed.
func (s nftState) changesTo(next nftState) string {
	var b strings.Builder
	put := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	const t = "inet " + sgTable
	for _, name := range sortedKeys(next.counters) {
		if !s.counters[name] {
			put("add counter %s %s", t, name)
		}
	}
	for _, name := range sortedKeys(next.sets) {
		set, old := next.sets[name], s.sets[name]
		if _, ok := s.sets[name]; !ok {
			put("add set %s %s { type %s; flags interval; auto-merge; }", t, name, set.typ)
		} else if slices.Equal(old.elements, set.elements) {
			continue
		}
		put("flush set %s %s", t, name)
		if len(set.elements) > 0 {
			put("add element %s %s { %s }", t, name, strings.Join(set.elements, ", "))
		}
	}
	for _, name := range sortedKeys(next.chains) {
		if _, ok := s.chains[name]; !ok {
			put("add chain %s %s", t, name)
		}
	}
	for _, name := range sortedKeys(next.chains) {
		if old, ok := s.chains[name]; ok && slices.Equal(old, next.chains[name]) {
			continue
		}
		put("flush chain %s %s", t, name)
		for _, r := range next.chains[name] {
			put("add rule %s %s %s", t, name, r)
		}
	}
	for _, name := range sortedKeys(s.chains) {
		if _, ok := next.chains[name]; !ok {
			put("flush chain %s %s", t, name)
		}
	}
	for _, m := range []struct {
		name      string
		old, next map[string]string
	}{{"egress_of", s.egressOf, next.egressOf}, {"ingress_of", s.ingressOf, next.ingressOf}} {
		for _, link := range sortedKeys(m.old) {
			if m.next[link] != m.old[link] {
				put("delete element %s %s { %q }", t, m.name, link)
			}
		}
		for _, link := range sortedKeys(m.next) {
			if m.next[link] != m.old[link] {
				put("add element %s %s { %q : jump %s }", t, m.name, link, m.next[link])
			}
		}
	}
	for _, name := range sortedKeys(s.chains) {
		if _, ok := next.chains[name]; !ok {
			put("delete chain %s %s", t, name)
		}
	}
	for _, name := range sortedKeys(s.sets) {
		if _, ok := next.sets[name]; !ok {
			put("delete set %s %s", t, name)
		}
	}
	for _, name := range sortedKeys(s.counters) {
		if !next.counters[name] {
			put("delete counter %s %s", t, name)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

var namedCounterPackets = regexp.MustCompile(`packets (\d+) bytes`)

// readNamedCounter reads the packets of a named nft counter.
func readNamedCounter(nsPath, family, table, name string) (uint64, error) {
	out, err := nft(nsPath, "", "list", "counter", family, table, name)
	if err != nil {
		return 0, fmt.Errorf("reading counter %s: %w", name, err)
	}
	m := namedCounterPackets.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("reading counter %s: no packet count in %q", name, out)
	}
	return strconv.ParseUint(m[1], 10, 64)
}
