package controller

import (
	"errors"
	"net/netip"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// IPv4 egress of IPv6 pods, as the AWS VPC CNI's IPv6 mode gives it: every IPv6 pod also holds one IPv4
// address of a node-local range, from which it reaches IPv4-only destinations; the node translates it to its
// primary IPv4 (datapath/snat) and the programs drop IPv4 from any other source. The address is chosen under
// the books' lock and written in the pod's assignment record, so it is journaled with the pod's IPv6
// address: two pods never hold the same one, and a restart finds each where it was.

// ErrEgressRangeFull: every address of dptypes.IPv4EgressRange is held by a pod (more pods than the range
// holds, far above any max pods).
var ErrEgressRangeFull = errors.New("no free IPv4 egress address in " + dptypes.IPv4EgressRange.String())

// pickEgressIP is the lowest address of dptypes.IPv4EgressRange, from its second on, that no assignment of st
// holds and that does not cool down at now. It needs the books' lock held. A released pod's address cools down
// as its IPv6 does (IP_COOLDOWN_PERIOD): the node's SNAT conntrack entries of its flows outlive the release (the
// kernel keeps a UDP or TCP entry for its own timeout), and the next pod at that address would get their replies.
func pickEgressIP(st *journal.State, now time.Time) (string, error) {
	held := make(map[netip.Addr]bool, len(st.Assignments)+len(st.Cooldowns))
	for _, a := range st.Assignments {
		if ip, err := netip.ParseAddr(a.EgressIP); err == nil {
			held[ip] = true
		}
	}
	for _, c := range st.Cooldowns {
		if ip, err := netip.ParseAddr(c.IP); err == nil && now.Before(c.Until) && dptypes.IPv4EgressRange.Contains(ip) {
			held[ip] = true
		}
	}
	for ip := dptypes.IPv4EgressRange.Addr().Next(); dptypes.IPv4EgressRange.Contains(ip); ip = ip.Next() {
		if !held[ip] {
			return ip.String(), nil
		}
	}
	return "", ErrEgressRangeFull
}
