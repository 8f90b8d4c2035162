package netpol

import (
	"cmp"
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
// enclosing them) are left out. The result is sorted by address, then prefix length.
func fold(grants []grant) []dptypes.PeerPorts {
	if len(grants) == 0 {
		return nil
	}
	// node is one distinct prefix: the grants that start there and those whose except it is.
	type node struct {
		prefix netip.Prefix
		starts []int
		holes  []int
	}
	byPrefix := make(map[netip.Prefix]*node, len(grants))
	at := func(p netip.Prefix) *node {
		n := byPrefix[p]
		if n == nil {
			n = &node{prefix: p}
			byPrefix[p] = n
		}
		return n
	}
	for i, g := range grants {
		at(g.prefix).starts = append(at(g.prefix).starts, i)
		for _, e := range g.except {
			at(e).holes = append(at(e).holes, i)
		}
	}
	nodes := make([]*node, 0, len(byPrefix))
	for _, n := range byPrefix {
		nodes = append(nodes, n)
	}
	// In this order a prefix comes before every prefix inside it, and those follow it contiguously.
	slices.SortFunc(nodes, func(a, b *node) int { return comparePrefixes(a.prefix, b.prefix) })

	// frame is an enclosing prefix on the walk: the grants in force there, their union, and the ports of
	// the nearest enclosing entry that was emitted (what a lookup falls back to).
	type frame struct {
		prefix  netip.Prefix
		active  []int
		ports   portSet
		emitted portSet
	}
	var stack []frame
	var out []dptypes.PeerPorts
	for _, n := range nodes {
		for len(stack) > 0 && !stack[len(stack)-1].prefix.Contains(n.prefix.Addr()) {
			stack = stack[:len(stack)-1]
		}
		var parent *frame
		if len(stack) > 0 {
			parent = &stack[len(stack)-1]
		}
		f := frame{prefix: n.prefix}
		if parent != nil {
			f.active, f.ports, f.emitted = parent.active, parent.ports, parent.emitted
		}
		if len(n.starts) > 0 {
			f.active = append(slices.Clip(f.active), n.starts...)
			if len(n.holes) == 0 {
				sets := []portSet{f.ports}
				for _, i := range n.starts {
					sets = append(sets, grants[i].ports)
				}
				f.ports = unionPorts(sets...)
			}
		}
		if len(n.holes) > 0 {
			f.active = slices.DeleteFunc(slices.Clone(f.active), func(i int) bool { return slices.Contains(n.holes, i) })
			sets := make([]portSet, 0, len(f.active))
			for _, i := range f.active {
				sets = append(sets, grants[i].ports)
			}
			f.ports = unionPorts(sets...)
		}
		if !slices.Equal(f.ports, f.emitted) {
			out = append(out, dptypes.PeerPorts{Peer: n.prefix, Ports: slices.Clone(f.ports)})
			f.emitted = f.ports
		}
		stack = append(stack, f)
	}
	return out
}

// comparePrefixes orders prefixes by family, masked address, then length: a prefix sorts before the
// prefixes inside it.
func comparePrefixes(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// hostPrefix is the single-address prefix of a.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// everyone is the prefixes of every address of both families: the peer of a rule with an empty from/to.
var everyone = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
