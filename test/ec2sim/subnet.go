package ec2sim

import (
	"math/rand/v2"
	"net/netip"
)

// subnet keeps true free-address accounting: AWS reserves the first four addresses and the last one of
// every subnet; every other address is either free or owned by exactly one ENI (as an IP or inside a
// /28 prefix). Addresses inside a subnet CIDR reservation (reservations.go) are never handed out to a
// request for a count of addresses; those of a prefix reservation are where counted prefixes come from first.
type subnet struct {
	ID, VPCID, AZ string
	CIDR          netip.Prefix
	Tags          map[string]string
	base          uint32
	size          uint32
	used          []bool
	nUsed         int
	cursor        uint32
	// resv is each address's reservation type (resvNone when outside every reservation).
	resv         []resvType
	reservations []*cidrReservation
	// scatter, when set, hands addresses out across the whole subnet, as EC2 does, rather than in order:
	// single IPs then fragment the subnet so that no aligned /28 may be free though many addresses are.
	scatter *rand.Rand
	// held are the offsets ExhaustSubnet took: used, owned by no ENI.
	held []uint32
	// IPv6 is the subnet's IPv6 /64 and its holders, nil for an IPv4-only subnet (ipv6.go).
	IPv6 *subnetIPv6
}

func newSubnet(id, vpcID, az string, p netip.Prefix) *subnet {
	size := uint32(1) << (32 - p.Bits())
	sn := &subnet{ID: id, VPCID: vpcID, AZ: az, CIDR: p, Tags: map[string]string{},
		base: addrU32(p.Addr()), size: size, used: make([]bool, size), resv: make([]resvType, size), cursor: 4}
	for _, off := range []uint32{0, 1, 2, 3, size - 1} {
		sn.used[off] = true
	}
	return sn
}

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func u32Addr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Free is AvailableIpAddressCount.
func (sn *subnet) Free() int { return int(sn.size) - 5 - sn.nUsed }

// Gateway is the VPC router's address in this subnet (the first host address).
func (sn *subnet) Gateway() netip.Addr { return u32Addr(sn.base + 1) }

func (sn *subnet) offset(a netip.Addr) (uint32, bool) {
	if !a.Is4() || !sn.CIDR.Contains(a) {
		return 0, false
	}
	return addrU32(a) - sn.base, true
}

// isFree says whether a is a usable, unowned address of the subnet.
func (sn *subnet) isFree(a netip.Addr) bool {
	off, ok := sn.offset(a)
	return ok && !sn.used[off]
}

func (sn *subnet) take(a netip.Addr) {
	off, _ := sn.offset(a)
	sn.used[off] = true
	sn.nUsed++
}

func (sn *subnet) release(a netip.Addr) {
	off, ok := sn.offset(a)
	if !ok || off < 4 || off == sn.size-1 || !sn.used[off] {
		return
	}
	sn.used[off] = false
	sn.nUsed--
}

// assignable says whether the address at off may be handed out for a count: free and outside every
// reservation.
func (sn *subnet) assignable(off uint32) bool { return !sn.used[off] && sn.resv[off] == resvNone }

// Assignable is how many addresses a count of secondary IPs (or a new ENI's primary) may still take: the
// free ones outside every reservation.
func (sn *subnet) Assignable() int {
	n := sn.Free()
	for _, r := range sn.reservations {
		off, _ := sn.offset(r.CIDR.Addr())
		for i := off; i < off+r.size(); i++ {
			if !sn.used[i] && sn.resv[i] != resvNone {
				n--
			}
		}
	}
	return n
}

// allocate takes n assignable addresses, or fewer when there are not that many (the caller checks
// Assignable() first). In order, it scans from a moving cursor so that consecutive allocations are
// amortised O(1); scattered, it probes random addresses, then scans from a random one.
func (sn *subnet) allocate(n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for len(out) < n {
		off, ok := sn.nextAssignable()
		if !ok {
			break
		}
		sn.used[off] = true
		sn.nUsed++
		out = append(out, u32Addr(sn.base+off))
	}
	return out
}

func (sn *subnet) nextAssignable() (uint32, bool) {
	usable := sn.size - 5
	if sn.scatter != nil {
		for range 32 {
			if off := 4 + uint32(sn.scatter.IntN(int(usable))); sn.assignable(off) {
				return off, true
			}
		}
		sn.cursor = 4 + uint32(sn.scatter.IntN(int(usable)))
	}
	for scanned := uint32(0); scanned < usable; scanned++ {
		off := sn.cursor
		sn.cursor++
		if sn.cursor >= sn.size-1 {
			sn.cursor = 4
		}
		if sn.assignable(off) {
			return off, true
		}
	}
	return 0, false
}

// prefixFree says whether the /28 p lies inside the subnet with all its 16 addresses free.
func (sn *subnet) prefixFree(p netip.Prefix) bool {
	if p.Bits() != 28 || !sn.CIDR.Contains(p.Addr()) || p.Masked() != p {
		return false
	}
	off, _ := sn.offset(p.Addr())
	for i := off; i < off+16; i++ {
		if sn.used[i] {
			return false
		}
	}
	return true
}

func (sn *subnet) takePrefix(p netip.Prefix) {
	off, _ := sn.offset(p.Addr())
	for i := off; i < off+16; i++ {
		sn.used[i] = true
	}
	sn.nUsed += 16
}

func (sn *subnet) releasePrefix(p netip.Prefix) {
	off, ok := sn.offset(p.Addr())
	if !ok {
		return
	}
	for i := off; i < off+16; i++ {
		if sn.used[i] {
			sn.used[i] = false
			sn.nUsed--
		}
	}
}

// allocatePrefixes takes n aligned, wholly free /28s, those inside prefix reservations first, then those
// outside every reservation, as EC2 does; it returns nil when the free space is too fragmented (or too
// small) to provide them.
func (sn *subnet) allocatePrefixes(n int) []netip.Prefix {
	var out []netip.Prefix
	for _, kind := range []resvType{resvPrefix, resvNone} {
		for off := uint32(0); off+16 <= sn.size && len(out) < n; off += 16 {
			p := netip.PrefixFrom(u32Addr(sn.base+off), 28)
			if sn.prefixFree(p) && sn.wholly(off, kind) {
				out = append(out, p)
			}
		}
	}
	if len(out) < n {
		return nil
	}
	for _, p := range out {
		sn.takePrefix(p)
	}
	return out
}

// wholly says whether the 16 addresses from off all have reservation type kind.
func (sn *subnet) wholly(off uint32, kind resvType) bool {
	for i := off; i < off+16; i++ {
		if sn.resv[i] != kind {
			return false
		}
	}
	return true
}

// assignableAmong is how many of the given addresses and /28s' addresses are assignable: what a request
// naming them takes away from Assignable().
func (sn *subnet) assignableAmong(addrs []netip.Addr, prefixes []netip.Prefix) int {
	n := 0
	for _, a := range addrs {
		if off, ok := sn.offset(a); ok && sn.assignable(off) {
			n++
		}
	}
	for _, p := range prefixes {
		off, ok := sn.offset(p.Addr())
		for i := off; ok && i < off+16 && i < sn.size; i++ {
			if sn.assignable(i) {
				n++
			}
		}
	}
	return n
}

// hold takes up to n free addresses, lowest first, owned by no ENI (see Sim.ExhaustSubnet).
func (sn *subnet) hold(n int) int {
	taken := 0
	for off := uint32(4); off < sn.size-1 && taken < n; off++ {
		if !sn.used[off] {
			sn.used[off] = true
			sn.nUsed++
			sn.held = append(sn.held, off)
			taken++
		}
	}
	return taken
}

// unhold releases what hold took.
func (sn *subnet) unhold() int {
	n := len(sn.held)
	for _, off := range sn.held {
		sn.used[off] = false
		sn.nUsed--
	}
	sn.held = nil
	return n
}
