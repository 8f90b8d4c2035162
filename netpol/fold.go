package netpol

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// grant is what one rule allows one peer prefix: ports, everywhere in the prefix except the except
// prefixes (an ipBlock's except; each lies inside prefix).
type grant struct {
	prefix netip.Prefix
	except []netip.Prefix
	ports  portSet
}

// fold turns the grants of one direction into the contract's longest-prefix form: one entry per distinct
// prefix, holding the union of the ports of every grant that covers the prefix and whose except does not,
// so that a lookup of the longest prefix containing an address finds everything allowed to it. Entries
// that would change nothing (the same ports as the entry that encloses them, or no ports and nothing
// enclosing them) are left out. The result is sorted by address, then prefix length. Its port sets may be
// shared with the grants' and with each other: read, never modify them. It works in s.
func fold(grants []grant, s *scratch) []dptypes.PeerPorts {
	if len(grants) == 0 {
		return nil
	}
	marks := s.marks[:0]
	for i, g := range grants {
		marks = append(marks, newMark(g.prefix, i, false))
		for _, e := range g.except {
			marks = append(marks, newMark(e, i, true))
		}
	}
	// By family, (masked) address, then length: a prefix comes before every prefix inside it, and those
	// follow it contiguously.
	slices.SortFunc(marks, func(a, b mark) int {
		return cmp.Or(cmp.Compare(a.family, b.family), cmp.Compare(a.hi, b.hi), cmp.Compare(a.lo, b.lo), cmp.Compare(a.prefix.Bits(), b.prefix.Bits()))
	})

	s.marks = marks
	var stack []frame
	out := s.out[:0]
	for lo := 0; lo < len(marks); {
		hi := lo + 1
		for hi < len(marks) && marks[hi].prefix == marks[lo].prefix {
			hi++
		}
		f := frame{prefix: marks[lo].prefix, marks: marks[lo:hi]}
		lo = hi
		for len(stack) > 0 && !stack[len(stack)-1].prefix.Contains(f.prefix.Addr()) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			f.ports, f.emitted = stack[len(stack)-1].ports, stack[len(stack)-1].emitted
		}
		if slices.ContainsFunc(f.marks, func(m mark) bool { return m.hole }) {
			f.ports = activePorts(grants, append(slices.Clone(stack), f))
		} else {
			for _, m := range f.marks {
				f.ports = addPorts(f.ports, grants[m.grant].ports)
			}
		}
		if !slices.Equal(f.ports, f.emitted) {
			out = append(out, dptypes.PeerPorts{Peer: f.prefix, Ports: f.ports})
			f.emitted = f.ports
		}
		stack = append(stack, f)
	}
	s.out = out
	if len(out) == 0 {
		return nil
	}
	return slices.Clone(out)
}

// mark is a prefix where a grant starts, or where one of its excepts makes a hole. family, hi and lo are
// its address as numbers, for a fast sort.
type mark struct {
	prefix netip.Prefix
	family uint8
	hi, lo uint64
	grant  int
	hole   bool
}

func newMark(p netip.Prefix, grant int, hole bool) mark {
	b := p.Addr().As16()
	m := mark{prefix: p, grant: grant, hole: hole, hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
	if p.Addr().Is6() {
		m.family = 1
	}
	return m
}

// frame is one distinct prefix on fold's walk: its marks, the union of the ports of the grants in force
// there, and the ports of the nearest enclosing entry emitted (what a lookup falls back to).
type frame struct {
	prefix  netip.Prefix
	marks   []mark
	ports   portSet
	emitted portSet
}

// addPorts is ports with g's added; it allocates only when g adds something.
func addPorts(ports, g portSet) portSet {
	switch {
	case len(ports) == 0:
		return g
	case subset(g, ports):
		return ports
	}
	return unionPorts(ports, g)
}

// activePorts is the union of the ports of the grants started in the frames (a prefix and those enclosing
// it) and holed in none of them: a grant's holes lie inside it, so they come in its frame or later ones.
func activePorts(grants []grant, frames []frame) portSet {
	holed := map[int]bool{}
	for _, f := range frames {
		for _, m := range f.marks {
			if m.hole {
				holed[m.grant] = true
			}
		}
	}
	var ports portSet
	for _, f := range frames {
		for _, m := range f.marks {
			if !m.hole && !holed[m.grant] {
				ports = addPorts(ports, grants[m.grant].ports)
			}
		}
	}
	return ports
}

// subset says whether every port of a is in b (both normalised).
func subset(a, b portSet) bool {
	if b.any() {
		return true
	}
	for _, r := range a {
		if !slices.ContainsFunc(b, func(s dptypes.PortRange) bool {
			return s.Protocol == r.Protocol && s.First <= r.First && r.Last <= s.Last
		}) {
			return false
		}
	}
	return true
}

// hostPrefix is the single-address prefix of a.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// everyone is the prefixes of every address of both families: the peer of a rule with an empty from/to.
var everyone = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
