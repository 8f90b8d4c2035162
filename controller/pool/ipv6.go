package pool

import (
	"net/netip"

	"github.com/eniwire/eniwire/controller/journal"
)

// PickIPv6 returns a free address of the IPv6 /80s of the usable ENIs (ENABLE_IPv6) that avail allows, and
// its ENI, or ok false when there is none. A /80 holds 2^48 addresses, so it is never enumerated: the walk
// starts at the prefix's second address (the first, all zeros in its last 48 bits, is left out as a
// subnet-router-like address no pod should hold) and takes the lowest address no pod holds, none cooling down:
// a released address comes back once its cooldown ends, as IPv4 addresses do. Only the addresses the books
// name can be in use, so the walk ends within that many steps.
func (v *View) PickIPv6(avail func(eniID, ip string) bool) (ip string, eni *journal.ENI, ok bool) {
	steps := len(v.assigned) + len(v.cooling) + len(v.leaving) + 1
	for _, e := range v.usableENIs("") {
		for _, s := range e.IPv6Prefixes {
			p, err := netip.ParsePrefix(s)
			if err != nil || !p.Addr().Is6() {
				continue
			}
			a := p.Masked().Addr().Next()
			for range steps {
				if !p.Contains(a) {
					break
				}
				if ip := a.String(); v.State(ip) == IPFree && (avail == nil || avail(e.ID, ip)) {
					return ip, e, true
				}
				a = a.Next()
			}
		}
	}
	return "", nil, false
}
