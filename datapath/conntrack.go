package datapath

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// forgetFlows removes the conntrack entries of a pod's address, in either direction and translated or
// not, so that an address handed to a new pod inherits no flow the host carried for the old one (the
// programs would send its packets to the host). Run in the node's network namespace.
func forgetFlows(ip netip.Addr) (uint, error) {
	ip = ip.Unmap()
	family := netlink.InetFamily(netlink.FAMILY_V4)
	if ip.Is6() {
		family = netlink.FAMILY_V6
	}
	var filters []netlink.CustomConntrackFilter
	for _, by := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP, netlink.ConntrackReplyAnyIP} {
		f := &netlink.ConntrackFilter{}
		if err := f.AddIP(by, ip.AsSlice()); err != nil {
			return 0, fmt.Errorf("filtering conntrack entries of %s: %w", ip, err)
		}
		filters = append(filters, f)
	}
	// The table is dumped, then the matching entries deleted; a dump interrupted by the host's flows coming
	// and going deletes what it found and is taken again for the rest.
	var deleted uint
	_, err := netlinkdump.Retry(func() (uint, error) {
		n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, family, filters...)
		deleted += n
		return n, err
	})
	if err != nil {
		return deleted, fmt.Errorf("deleting conntrack entries of %s: %w", ip, err)
	}
	return deleted, nil
}
