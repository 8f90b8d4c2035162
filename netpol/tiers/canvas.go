package tiers

import (
	"slices"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// cells is one protocol's ports, 0 to 65535, cut into cells at its cuts: sorted, unique, the first 0.
// Cell i holds the ports from cuts[i] up to the next cut, that one excluded.
type cells []uint16

// cut is the cells of the ranges given (first and last ports, both included, as pairs): a cut at each
// range's first port and after its last, so that every cell lies wholly inside or outside each range.
// It reuses buf.
func cut(buf []uint16, ranges [][2]uint16) cells {
	buf = append(buf[:0], 0)
	for _, r := range ranges {
		buf = append(buf, r[0])
		if r[1] < dptypes.AllPorts[1] {
			buf = append(buf, r[1]+1)
		}
	}
	slices.Sort(buf)
	return slices.Compact(buf)
}

// of is the cell that holds port.
func (c cells) of(port uint16) int {
	i, found := slices.BinarySearch(c, port)
	if !found {
		i--
	}
	return i
}

// last is the last port of cell i.
func (c cells) last(i int) uint16 {
	if i+1 < len(c) {
		return c[i+1] - 1
	}
	return dptypes.AllPorts[1]
}

// canvas is a row of cells that are painted once each: the first paint of a cell holds. It is a
// union-find of "the next cell not painted yet", so painting a range costs the cells it paints, not the
// cells it spans, and a tier's rules decide each cell once whatever their number.
type canvas struct{ next []int32 }

// reset makes n unpainted cells.
func (c *canvas) reset(n int) {
	c.next = c.next[:0]
	for i := range n + 1 { // one past the end: where painted cells lead at last
		c.next = append(c.next, int32(i))
	}
}

// find is the first unpainted cell from i on (n when there is none).
func (c *canvas) find(i int) int {
	for int(c.next[i]) != i {
		c.next[i] = c.next[c.next[i]] // halve the path
		i = int(c.next[i])
	}
	return i
}

// paint calls f for each unpainted cell from lo to hi, both included, and marks it painted.
func (c *canvas) paint(lo, hi int, f func(cell int)) {
	for i := c.find(lo); i <= hi; i = c.find(i + 1) {
		f(i)
		c.next[i] = int32(i + 1)
	}
}
