package journal

import (
	"net/netip"
	"strings"
)

// An ENI's IPs are its IPv4 slots as the books hold them: each is either one secondary private address
// ("10.0.1.5") or one delegated /28 prefix in CIDR notation ("10.0.1.16/28"), whose PrefixAddrs addresses all
// go to pods. EC2 counts either as one IPv4 address of the ENI. Keeping both in one list keeps the journal's
// two-phase rules and the reconcile's comparison with EC2 the same for both.

// PrefixAddrs is the number of addresses of an IPv4 /28 prefix.
const PrefixAddrs = 16

// IsPrefix reports whether a slot is a /28 prefix rather than one address.
func IsPrefix(slot string) bool { return strings.Contains(slot, "/") }

// Addresses returns the addresses a slot gives to pods: the address itself, or every address of the prefix.
// An IPv6 prefix (an /80 an IPv6 op names) is never enumerated: nil.
func Addresses(slot string) []string {
	if !IsPrefix(slot) {
		return []string{slot}
	}
	p, err := netip.ParsePrefix(slot)
	if err != nil || !p.Addr().Is4() {
		return nil
	}
	n := 1 << (32 - p.Bits())
	out := make([]string, 0, n)
	a := p.Masked().Addr()
	for range n {
		out = append(out, a.String())
		a = a.Next()
	}
	return out
}

// AddrCount returns how many addresses a slot gives to pods.
func AddrCount(slot string) int {
	if !IsPrefix(slot) {
		return 1
	}
	if p, err := netip.ParsePrefix(slot); err == nil && p.Addr().Is4() {
		return 1 << (32 - p.Bits())
	}
	return 0
}

// Covers reports whether ip is one of the addresses of slot.
func Covers(slot, ip string) bool {
	if !IsPrefix(slot) {
		return slot == ip
	}
	p, err := netip.ParsePrefix(slot)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && p.Contains(a)
}

// CoveredBy reports whether any of slots covers ip.
func CoveredBy(slots []string, ip string) bool {
	for _, s := range slots {
		if Covers(s, ip) {
			return true
		}
	}
	return false
}

// SplitSlots separates slots into single addresses and prefixes, as EC2's IP calls take them.
func SplitSlots(slots []string) (ips, prefixes []string) {
	for _, s := range slots {
		if IsPrefix(s) {
			prefixes = append(prefixes, s)
		} else {
			ips = append(ips, s)
		}
	}
	return ips, prefixes
}

// Addrs returns the addresses of every slot of the ENI, in slot order.
func (e *ENI) Addrs() []string {
	var out []string
	for _, s := range e.IPs {
		out = append(out, Addresses(s)...)
	}
	return out
}
