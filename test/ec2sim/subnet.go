package ec2sim

import (
	"net/netip"
)

// subnet keeps true free-address accounting: AWS reserves the first four addresses and the last one of
// every subnet; every other address is either free or owned by exactly one ENI (as an IP or inside a
// /28 prefix).
type subnet struct {
	ID, VPCID, AZ string
	CIDR          netip.Prefix
	Tags          map[string]string
	base          uint32
	size          uint32
	used          []bool
	nUsed         int
	cursor        uint32
}

func newSubnet(id, vpcID, az string, p netip.Prefix) *subnet {
	size := uint32(1) << (32 - p.Bits())
	sn := &subnet{ID: id, VPCID: vpcID, AZ: az, CIDR: p, Tags: map[string]string{},
		base: addrU32(p.Addr()), size: size, used: make([]bool, size), cursor: 4}
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

// allocate takes n free addresses, scanning from a moving cursor so that consecutive allocations are
// amortised O(1). The caller checks Free() first.
func (sn *subnet) allocate(n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for scanned := uint32(0); len(out) < n && scanned < sn.size; scanned++ {
		off := sn.cursor
		sn.cursor++
		if sn.cursor >= sn.size-1 {
			sn.cursor = 4
		}
		if !sn.used[off] {
			sn.used[off] = true
			sn.nUsed++
			out = append(out, u32Addr(sn.base+off))
		}
	}
	return out
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

// allocatePrefixes takes n aligned, wholly free /28s, or returns nil when the free space is too
// fragmented (or too small) to provide them.
func (sn *subnet) allocatePrefixes(n int) []netip.Prefix {
	var out []netip.Prefix
	for off := uint32(0); off+16 <= sn.size && len(out) < n; off += 16 {
		p := netip.PrefixFrom(u32Addr(sn.base+off), 28)
		if sn.prefixFree(p) {
			out = append(out, p)
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
