// Package linktest holds what the datapath's namespace tests do to links of their own making.
package linktest

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Up adds cidr (if any) to the link name, sets it up and returns it read again, so its attributes show the
// state it is in now.
func Up(name, cidr string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", name, err)
	}
	if cidr != "" {
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			return nil, err
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			return nil, fmt.Errorf("adding %s to %s: %w", cidr, name, err)
		}
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("setting %s up: %w", name, err)
	}
	return netlink.LinkByName(name)
}
