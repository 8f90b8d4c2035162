package plumbing

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// currentNS runs each call on a socket of its own, opened in the calling thread's namespace.
var currentNS = &netlink.Handle{}

// Pod is a pod's network namespace held open with a netlink socket inside it, and a socket in the namespace
// that opened it (the node's): the pod side is changed from the calling thread, which never enters the pod's
// namespace, and neither side opens a socket per call. Close it when done.
type Pod struct {
	ns   ns.NetNS
	nl   *netlink.Handle
	host *netlink.Handle
}

// OpenPod opens the network namespace at path; the error wraps ErrNetnsMissing when path is not one.
func OpenPod(path string) (*Pod, error) {
	n, err := openNS(path)
	if err != nil {
		return nil, err
	}
	host, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("opening a netlink socket: %w", err)
	}
	h, err := netlink.NewHandleAt(netns.NsHandle(int(n.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		host.Close()
		n.Close()
		return nil, fmt.Errorf("opening a netlink socket in %s: %w", path, err)
	}
	return &Pod{ns: n, nl: h, host: host}, nil
}

// Path is the namespace's path.
func (p *Pod) Path() string { return p.ns.Path() }

// Close releases the namespace and its socket.
func (p *Pod) Close() error {
	p.nl.Close()
	p.host.Close()
	return p.ns.Close()
}
