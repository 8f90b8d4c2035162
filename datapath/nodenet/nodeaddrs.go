package nodenet

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// nodeAddrs keeps the node's own addresses in the routes map equal to its local addresses, IPv4 and global
// IPv6, so that a pod's packet to any of them goes to the host in both SNAT modes: the primary IP, each
// secondary ENI's primary IP (added by ENIUp), the node's IPv6 address in IPv6 mode (a pod's packet to an
// IPv6 address outside the routes map leaves by its ENI, so kubelet's and NodePorts' node address would
// not be reached from the node's own pods), and any address an operator or an add-on puts on an interface
// later (a dummy interface's). Link-local and loopback IPv6 addresses are not the node's to other hosts and
// are left out. It follows the kernel's address notifications from Open to Close. Who may touch it:
// Open builds it, its goroutine and ENIUp refresh under mu, Close closes.
type nodeAddrs struct {
	h       *netlink.Handle // in the node's network namespace, whichever thread asks
	primary netip.Addr      // the node's primary IP, always among its addresses
	dp      *datapath.Datapath
	log     *slog.Logger

	mu   sync.Mutex // serializes refreshes
	last []netip.Addr

	updates    chan netlink.AddrUpdate
	stop, done chan struct{}
	closeOnce  sync.Once
}

// watchNodeAddrs subscribes to the node's address changes and reads its addresses (current), in the
// network namespace of the caller's thread. follow then keeps a datapath up to date until close.
func watchNodeAddrs(primary netip.Addr, log *slog.Logger) (*nodeAddrs, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	a := &nodeAddrs{h: h, primary: primary, log: log, updates: make(chan netlink.AddrUpdate, 64), stop: make(chan struct{}), done: make(chan struct{})}
	// Subscribed before the first read, so that no change falls between.
	if err := netlink.AddrSubscribeWithOptions(a.updates, a.stop, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) { log.Warn("following the node's addresses", "error", err) },
	}); err != nil {
		h.Close()
		return nil, fmt.Errorf("following the node's addresses: %w", err)
	}
	if a.last, err = a.read(); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// current is what the last read found.
func (a *nodeAddrs) current() []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.last)
}

// follow writes every later change of the node's addresses to dp, which holds current already.
func (a *nodeAddrs) follow(dp *datapath.Datapath) {
	a.mu.Lock()
	a.dp = dp
	a.mu.Unlock()
	go a.run(a.updates)
}

func (a *nodeAddrs) run(updates <-chan netlink.AddrUpdate) {
	defer close(a.done)
	for {
		select {
		case <-a.stop:
			return
		case u, ok := <-updates:
			if !ok {
				a.log.Error("the kernel's address notifications stopped: an address the node gains from now on goes to the host only once an ENI comes up or the agent restarts")
				return
			}
			if ip, ok := netip.AddrFromSlice(u.LinkAddress.IP); !ok || !nodeAddr(ip.Unmap()) {
				continue
			}
			if err := a.refresh(); err != nil {
				a.log.Error("writing the node's addresses to the routes map", "error", err)
			}
		}
	}
}

// nodeAddr says whether ip, an address on one of the node's interfaces, is one a pod may send to as the
// node's: every IPv4 one, and the global IPv6 ones.
func nodeAddr(ip netip.Addr) bool {
	return ip.Is4() || ip.IsGlobalUnicast()
}

// read returns the node's addresses (nodeAddr), sorted.
func (a *nodeAddrs) read() ([]netip.Addr, error) {
	list, err := netlinkdump.Addrs(a.h, nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	ips := []netip.Addr{a.primary}
	for _, l := range list {
		if ip, ok := netip.AddrFromSlice(l.IP); ok && nodeAddr(ip.Unmap()) && !slices.Contains(ips, ip.Unmap()) {
			ips = append(ips, ip.Unmap())
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	return ips, nil
}

// refresh reads the node's addresses and writes them when they changed.
func (a *nodeAddrs) refresh() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ips, err := a.read()
	if err != nil {
		return err
	}
	if slices.Equal(ips, a.last) {
		return nil
	}
	if err := a.dp.SetNodeIPs(ips); err != nil {
		return fmt.Errorf("writing the node's addresses: %w", err)
	}
	a.log.Info("node addresses go to the host", "addresses", ips, "was", a.last)
	a.last = ips
	return nil
}

// close stops following; the routes map keeps the last addresses written. It is idempotent.
func (a *nodeAddrs) close() {
	a.closeOnce.Do(func() {
		close(a.stop)
		a.mu.Lock()
		following := a.dp != nil
		a.mu.Unlock()
		if following {
			<-a.done
		}
		a.h.Close()
	})
}
