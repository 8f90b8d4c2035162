// Package linktest holds what the datapath's namespace tests do to links of their own making.
package linktest

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
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

// SendFrame writes frame, its Ethernet header included, out of the link name through a packet socket, as
// any process with CAP_NET_RAW in that namespace can: the kernel adds nothing and checks nothing.
func SendFrame(name string, frame []byte) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // protocol 0: sends, receives nothing
	if err != nil {
		return fmt.Errorf("opening a packet socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: l.Attrs().Index, Halen: 6}
	copy(to.Addr[:], frame[:6])
	if err := unix.Sendto(fd, frame, 0, to); err != nil {
		return fmt.Errorf("sending a frame out of %s: %w", name, err)
	}
	return nil
}
