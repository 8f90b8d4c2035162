package tiers

import (
	"cmp"
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// scratch is the space one prefix's verdicts are worked out in, reused from prefix to prefix.
type scratch struct {
	// matchAdmin and matchBaseline are the rules (positions) that match the prefix's addresses.
	matchAdmin, matchBaseline []int32
	ranges, localRanges       [][2]uint16
	cuts, localCuts           []uint16
	// adminSays and baselineSays are each cell's answer from its tier (0: none), localSays a policy's.
	adminSays, baselineSays, localSays []Action
	allowed, verdict                   []bool
	pieces                             []piece
	tierCanvas, localCanvas            canvas
}

// piece is ports of one protocol that a policy decides, and how.
type piece struct {
	first, last uint16
	action      Action
}

// verdicts is the cells of protocol at the prefix whose matching rules are in f.matchAdmin and
// f.matchBaseline and whose NetworkPolicy entry is np (nil: none), and the verdict on each cell: the
// evaluation of the package doc, one cell at a time. Both results live in f's scratch space.
func (f *flattener) verdicts(protocol uint8, np *dptypes.PeerPorts) (cells, []bool) {
	f.ranges = appendSpans(f.ranges[:0], f.admin, f.matchAdmin, protocol)
	f.ranges = appendSpans(f.ranges, f.baseline, f.matchBaseline, protocol)
	if np != nil {
		for _, r := range np.Ports {
			if first, last, ok := span(r, protocol); ok {
				f.ranges = append(f.ranges, [2]uint16{first, last})
			}
		}
	}
	cs := cut(f.cuts, f.ranges)
	f.cuts = cs
	f.adminSays = f.paintTier(f.adminSays, f.admin, f.matchAdmin, protocol, cs)
	f.baselineSays = f.paintTier(f.baselineSays, f.baseline, f.matchBaseline, protocol, cs)
	f.allowed = zeroed(f.allowed, len(cs))
	if np != nil {
		f.localCanvas.reset(len(cs))
		for _, r := range np.Ports {
			if first, last, ok := span(r, protocol); ok {
				f.localCanvas.paint(cs.of(first), cs.of(last), func(c int) { f.allowed[c] = true })
			}
		}
	}
	f.verdict = zeroed(f.verdict, len(cs))
	for c := range cs {
		switch f.adminSays[c] {
		case Accept:
			f.verdict[c] = true
		case Deny:
			f.verdict[c] = false
		default: // passed, or no rule matched
			if f.isolated {
				f.verdict[c] = f.allowed[c]
			} else {
				f.verdict[c] = f.baselineSays[c] != Deny // Accept, Pass to the default, or the default
			}
		}
	}
	return cs, f.verdict
}

// paintTier is, for each cell of cs, the answer of a tier whose matching rules are at (positions in its
// ordered rules), as decide gives it for one flow: priority by priority, each policy's first matching
// rules (firstMatches) paint the cells no earlier priority decided, most restrictive first, so that
// among the policies of one priority the most restrictive answer holds. It reuses out.
func (f *flattener) paintTier(out []Action, rules []Rule, at []int32, protocol uint8, cs cells) []Action {
	out = zeroed(out, len(cs))
	f.tierCanvas.reset(len(cs))
	for priority := range runs(at, func(i, j int32) bool { return samePriority(rules[i], rules[j]) }) {
		f.pieces = f.pieces[:0]
		for policy := range runs(priority, func(i, j int32) bool { return samePolicy(rules[i], rules[j]) }) {
			f.pieces = f.firstMatches(f.pieces, rules, policy, protocol)
		}
		slices.SortStableFunc(f.pieces, func(a, b piece) int {
			return cmp.Compare(b.action.restrictiveness(), a.action.restrictiveness())
		})
		for _, p := range f.pieces {
			f.tierCanvas.paint(cs.of(p.first), cs.of(p.last), func(c int) { out[c] = p.action })
		}
	}
	return out
}

// firstMatches appends to pieces the ports of protocol that the rules of one policy (positions, in
// order) decide: for each rule, the ports it matches that no earlier rule of the policy does. It works
// on the policy's own cells, so its cost is its own rules', whatever the cells of the prefix.
func (f *flattener) firstMatches(pieces []piece, rules []Rule, policy []int32, protocol uint8) []piece {
	if len(policy) == 1 {
		r := &rules[policy[0]]
		for first, last := range r.spans(protocol) {
			pieces = append(pieces, piece{first: first, last: last, action: r.Action})
		}
		return pieces
	}
	f.localRanges = appendSpans(f.localRanges[:0], rules, policy, protocol)
	lc := cut(f.localCuts, f.localRanges)
	f.localCuts = lc
	says := zeroed(f.localSays, len(lc))
	f.localSays = says
	f.localCanvas.reset(len(lc))
	for _, i := range policy {
		r := &rules[i]
		for first, last := range r.spans(protocol) {
			f.localCanvas.paint(lc.of(first), lc.of(last), func(c int) { says[c] = r.Action })
		}
	}
	for c, a := range says {
		if a == 0 {
			continue
		}
		if n := len(pieces); n > 0 && pieces[n-1].action == a && uint32(pieces[n-1].last)+1 == uint32(lc[c]) {
			pieces[n-1].last = lc.last(c)
			continue
		}
		pieces = append(pieces, piece{first: lc[c], last: lc.last(c), action: a})
	}
	return pieces
}

// appendSpans appends the spans of protocol of the rules at (positions in rules).
func appendSpans(buf [][2]uint16, rules []Rule, at []int32, protocol uint8) [][2]uint16 {
	for _, i := range at {
		for first, last := range rules[i].spans(protocol) {
			buf = append(buf, [2]uint16{first, last})
		}
	}
	return buf
}

// zeroed is buf resized to n zero values.
func zeroed[T any](buf []T, n int) []T {
	buf = slices.Grow(buf[:0], n)[:n]
	clear(buf)
	return buf
}
