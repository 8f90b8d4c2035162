package plumbing

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpRetries bounds how often a netlink dump is repeated when the kernel says a concurrent change
// interrupted it (another pod's ADD on the same node does that often).
const dumpRetries = 5

func retryDump[T any](f func() (T, error)) (T, error) {
	var (
		out T
		err error
	)
	for range dumpRetries {
		out, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, err
}

func linkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	return retryDump(func() (netlink.Link, error) { return h.LinkByName(name) })
}

func addrList(h *netlink.Handle, link netlink.Link) ([]netlink.Addr, error) {
	return retryDump(func() ([]netlink.Addr, error) { return h.AddrList(link, netlink.FAMILY_V4) })
}

func routeList(h *netlink.Handle, link netlink.Link) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return h.RouteList(link, netlink.FAMILY_V4) })
}

func neighList(h *netlink.Handle, index int) ([]netlink.Neigh, error) {
	return retryDump(func() ([]netlink.Neigh, error) { return h.NeighList(index, netlink.FAMILY_V4) })
}
