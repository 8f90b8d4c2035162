package tiers

import (
	"net/netip"
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Entry is the verdicts on the flows of the peers whose longest prefix among a Result's entries is Peer.
type Entry struct {
	Peer netip.Prefix
	// Allow is the verdict on every protocol and port outside Except.
	Allow bool
	// Except are the TCP, UDP and SCTP ports whose verdict is the opposite of Allow: sorted by protocol,
	// then port; the ranges of one protocol disjoint and not adjacent.
	Except []dptypes.PortRange
}

// Allows is e's verdict on a protocol and port (ignored for a protocol without ports).
func (e Entry) Allows(protocol uint8, port uint16) bool {
	return e.Allow != holds(e.Except, protocol, port)
}

// Result is the flattened verdicts of a Direction.
type Result struct {
	// Entries are sorted by prefix (netip.Prefix.Compare), each prefix once. Unless there are none, they
	// include 0.0.0.0/0 and ::/0, so that every address finds an entry.
	Entries []Entry
}

// Needed says whether the datapath has any flow of the direction to judge: false when every flow is
// allowed, as when no rule and no NetworkPolicy isolation reach it.
func (r Result) Needed() bool { return len(r.Entries) > 0 }

// Allows is r's verdict on a flow, read as the datapath reads it: the entry of the longest prefix that
// contains the peer, then its verdict on the protocol and port. With no entries, everything is allowed.
func (r Result) Allows(peer netip.Addr, protocol uint8, port uint16) bool {
	peer = peer.WithZone("")
	best := -1
	for i, e := range r.Entries {
		if e.Peer.Contains(peer) && (best < 0 || e.Peer.Bits() > r.Entries[best].Peer.Bits()) {
			best = i
		}
	}
	return best < 0 || r.Entries[best].Allows(protocol, port)
}

// roots are the whole address space of each family: the entries that leave no address without one.
var roots = [...]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// Flatten is the verdicts of Judge for every flow of d, as entries the datapath's two longest-prefix
// lookups hold (see the package doc for the method and its bounds).
func Flatten(d Direction) Result {
	f := newFlattener(d)
	var out []Entry
	// chain is the prefixes on the walk that contain the current one, outermost first, and shown the
	// entry each falls back to (its own, when it has one).
	var chain []netip.Prefix
	var shown []int
	denies := false
	for _, p := range f.prefixes {
		for len(chain) > 0 && !chain[len(chain)-1].Contains(p.Addr()) {
			chain, shown = chain[:len(chain)-1], shown[:len(shown)-1]
		}
		chain = append(chain, p)
		e := f.entry(chain)
		if n := len(shown); n > 0 && sameVerdicts(e, out[shown[n-1]]) {
			shown = append(shown, shown[n-1])
			continue
		}
		denies = denies || !e.Allow || len(e.Except) > 0
		out = append(out, e)
		shown = append(shown, len(out)-1)
	}
	if !denies {
		return Result{}
	}
	return Result{Entries: out}
}

func sameVerdicts(a, b Entry) bool { return a.Allow == b.Allow && slices.Equal(a.Except, b.Except) }

// flattener is what Flatten knows of a Direction: its rules ordered, indexed by peer prefix, and the
// NetworkPolicy entries by prefix; and its scratch space.
type flattener struct {
	admin, baseline     []Rule
	adminAt, baselineAt map[netip.Prefix][]int32 // positions in admin, baseline
	isolated            bool
	entryAt             map[netip.Prefix]dptypes.PeerPorts
	// prefixes are every prefix that may be an entry, sorted: a prefix comes before those inside it.
	prefixes []netip.Prefix
	scratch
}

func newFlattener(d Direction) *flattener {
	f := &flattener{isolated: d.Isolated, admin: ordered(d.Admin), entryAt: map[netip.Prefix]dptypes.PeerPorts{}}
	f.prefixes = append(f.prefixes, roots[:]...)
	f.adminAt = f.index(f.admin)
	if f.isolated {
		for _, e := range d.NetworkPolicy {
			if p, ok := key(e.Peer); ok {
				if _, dup := f.entryAt[p]; !dup {
					f.entryAt[p] = e
					f.prefixes = append(f.prefixes, p)
				}
			}
		}
	} else { // isolated, the Baseline tier is never reached
		f.baseline = ordered(d.Baseline)
		f.baselineAt = f.index(f.baseline)
	}
	slices.SortFunc(f.prefixes, netip.Prefix.Compare)
	f.prefixes = slices.Compact(f.prefixes)
	return f
}

// index is the positions of rules by each of their peer prefixes; it adds those to f.prefixes.
func (f *flattener) index(rules []Rule) map[netip.Prefix][]int32 {
	at := map[netip.Prefix][]int32{}
	for i, r := range rules {
		for _, peer := range r.Peers {
			p, ok := key(peer)
			if !ok {
				continue
			}
			if n := len(at[p]); n > 0 && at[p][n-1] == int32(i) {
				continue // a peer given twice
			}
			if len(at[p]) == 0 {
				f.prefixes = append(f.prefixes, p)
			}
			at[p] = append(at[p], int32(i))
		}
	}
	return at
}

// key is the form of a prefix the walk compares: masked; !ok for an invalid prefix, which contains
// nothing.
func key(p netip.Prefix) (netip.Prefix, bool) { return p.Masked(), p.IsValid() }

// entry is the verdicts of the last prefix of chain, the prefixes on the walk that contain it: the rules
// that match its addresses are those at any prefix of chain, and its NetworkPolicy entry the innermost
// one of chain.
func (f *flattener) entry(chain []netip.Prefix) Entry {
	f.matchAdmin = gather(f.matchAdmin, f.adminAt, chain)
	f.matchBaseline = gather(f.matchBaseline, f.baselineAt, chain)
	var np *dptypes.PeerPorts
	for i := len(chain) - 1; i >= 0 && np == nil; i-- {
		if e, ok := f.entryAt[chain[i]]; ok {
			np = &e
		}
	}
	e := Entry{Peer: chain[len(chain)-1]}
	_, others := f.verdicts(dptypes.AnyProtocol, np) // one cell: what no port range speaks of
	e.Allow = others[0]
	for _, protocol := range portedProtocols {
		cs, verdicts := f.verdicts(protocol, np)
		for c, allow := range verdicts {
			if allow == e.Allow {
				continue
			}
			first, last := cs[c], cs.last(c)
			if n := len(e.Except); n > 0 && e.Except[n-1].Protocol == protocol && uint32(e.Except[n-1].Last)+1 == uint32(first) {
				e.Except[n-1].Last = last
				continue
			}
			e.Except = append(e.Except, dptypes.PortRange{Protocol: protocol, First: first, Last: last})
		}
	}
	return e
}

// gather is the positions of the rules at the prefixes of chain, sorted, each once; it reuses buf.
func gather(buf []int32, at map[netip.Prefix][]int32, chain []netip.Prefix) []int32 {
	buf = buf[:0]
	for _, p := range chain {
		buf = append(buf, at[p]...)
	}
	slices.Sort(buf)
	return slices.Compact(buf)
}
