// Package netlinkdump lists what the kernel holds over netlink (links, addresses, routes, neighbours, tc
// filters; the datapath's conntrack clean-up through Retry) for every part of eniwire that reads it: the CNI
// plugin's plumbing and the datapath. A dump is
// read in several parts, and a change made meanwhile (a pod's veth added by another ADD, an ENI's link coming
// up, an address the node gains) makes the kernel mark it interrupted (NLM_F_DUMP_INTR, which
// vishvananda/netlink returns as netlink.ErrDumpInterrupted beside a possibly inconsistent result). Such a
// dump is taken again, a few times, before the error is returned.
package netlinkdump

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// Tries bounds how often one dump is taken: changes come in bursts (a node bringing several ENIs and pods
// up), and a dump takes well under a millisecond, so one of a few tries finds the kernel quiet.
const Tries = 10

// Retry calls dump until it returns anything but netlink.ErrDumpInterrupted, at most Tries times, and
// returns its last answer.
func Retry[T any](dump func() (T, error)) (T, error) {
	var (
		out T
		err error
	)
	for range Tries {
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, err
}

// handle is h, or the calling thread's network namespace when h is nil.
func handle(h *netlink.Handle) *netlink.Handle {
	if h == nil {
		return &netlink.Handle{}
	}
	return h
}

// Links lists the links (h nil: of the calling thread's network namespace).
func Links(h *netlink.Handle) ([]netlink.Link, error) {
	return Retry(handle(h).LinkList)
}

// LinkByName finds a link by name; kernels that cannot look a name up answer it from a dump.
func LinkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	return Retry(func() (netlink.Link, error) { return handle(h).LinkByName(name) })
}

// Addrs lists the addresses of family on link (nil: on every link).
func Addrs(h *netlink.Handle, link netlink.Link, family int) ([]netlink.Addr, error) {
	return Retry(func() ([]netlink.Addr, error) { return handle(h).AddrList(link, family) })
}

// Routes lists the main table's routes of family through link (nil: through any link).
func Routes(h *netlink.Handle, link netlink.Link, family int) ([]netlink.Route, error) {
	return Retry(func() ([]netlink.Route, error) { return handle(h).RouteList(link, family) })
}

// Neighs lists the neighbour entries of family on the link with ifindex (0: on every link).
func Neighs(h *netlink.Handle, ifindex, family int) ([]netlink.Neigh, error) {
	return Retry(func() ([]netlink.Neigh, error) { return handle(h).NeighList(ifindex, family) })
}

// Filters lists the tc filters of link under parent.
func Filters(h *netlink.Handle, link netlink.Link, parent uint32) ([]netlink.Filter, error) {
	return Retry(func() ([]netlink.Filter, error) { return handle(h).FilterList(link, parent) })
}
