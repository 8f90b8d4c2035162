package netpol

import (
	"cmp"
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// portSet is a normalised set of port ranges: sorted by protocol and first port, ranges of one protocol
// disjoint and not adjacent, and, when AnyProtocol is in it, that entry alone.
type portSet []dptypes.PortRange

var anyPorts = portSet{{Protocol: dptypes.AnyProtocol, First: dptypes.AllPorts[0], Last: dptypes.AllPorts[1]}}

func (s portSet) any() bool { return len(s) == 1 && s[0].Protocol == dptypes.AnyProtocol }

// unionPorts returns the normalised union of the ranges of every set given.
func unionPorts(sets ...portSet) portSet {
	var all []dptypes.PortRange
	for _, s := range sets {
		if s.any() {
			return anyPorts
		}
		all = append(all, s...)
	}
	return normalisePorts(all)
}

// normalisePorts sorts and merges ranges (it reorders rs).
func normalisePorts(rs []dptypes.PortRange) portSet {
	if len(rs) == 0 {
		return nil
	}
	for _, r := range rs {
		if r.Protocol == dptypes.AnyProtocol {
			return anyPorts
		}
	}
	slices.SortFunc(rs, func(a, b dptypes.PortRange) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.First, b.First), cmp.Compare(a.Last, b.Last))
	})
	out := portSet{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.Protocol == last.Protocol && uint32(r.First) <= uint32(last.Last)+1 {
			last.Last = max(last.Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}
