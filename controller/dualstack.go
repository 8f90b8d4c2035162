package controller

import (
	"errors"
	"net/netip"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// Dual-stack mode (Config.DualStack): each pod holds an IPv4 of the warm pool, as without IPv6, and an IPv6
// of the /80 the node takes on its primary ENI, as in IPv6 mode (stepIPv6, run before each IPv4 round). The
// two are picked together under the books' lock and written in one assignment record, so a crash keeps both
// or neither, a release puts both into cooldown, and a restart restores both. Max pods is IPv4's number: the
// /80 never runs out.

// ErrDualStackAndIPv6Mode: dual-stack mode is ENABLE_IPv6 with ENABLE_IPv4, IPv6 mode ENABLE_IPv6 without it;
// a Config cannot ask for both.
var ErrDualStackAndIPv6Mode = errors.New("dual-stack mode (ENABLE_IPv4 and ENABLE_IPv6) and IPv6 mode (ENABLE_IPv6 alone) " +
	"exclude each other")

// pickDualStack is a dual-stack pod's pair: a free IPv4 of the warm pool and its ENI, and a free address of
// the /80s; ok false while either is missing (the /80 not taken yet: the ADD waits for the pool manager's
// round as it waits for IPv4 IPs). It needs p.books.mu held.
func (p *ipam) pickDualStack(v *pool.View) (ip, ipv6 string, e *journal.ENI, ok bool) {
	if ip, e, ok = v.Pick(p.avail); !ok {
		return "", "", nil, false
	}
	if ipv6, _, ok = v.PickIPv6(p.avail); !ok {
		return "", "", nil, false
	}
	return ip, ipv6, e, true
}

// dualStackWarm is how many new pods a dual-stack node can address now, given its free IPv4s: each pod needs
// an address of a /80 too, so none while no ENI that pick may use holds one (the /80 not taken, or refused),
// and no more than max pods leaves. It needs p.books.mu held.
func (p *ipam) dualStackWarm(st *journal.State, ipv4Warm int) int {
	for _, e := range st.ENIs {
		if len(e.IPv6Prefixes) > 0 && e.Usable() && (p.avail == nil || p.avail(e.ID, "")) {
			return min(ipv4Warm, max(p.targets.MaxPods-len(st.Assignments), 0))
		}
	}
	return 0
}

// ipv6PrefixENI is the ENI whose /80 holds the address ip (a dual-stack pod's IPv6), or nil.
func ipv6PrefixENI(st *journal.State, ip string) *journal.ENI {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}
	for i := range st.ENIs {
		for _, s := range st.ENIs[i].IPv6Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(a) {
				return &st.ENIs[i]
			}
		}
	}
	return nil
}
