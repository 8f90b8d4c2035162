package vpcfabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns` keeps named namespaces, so that `ip netns exec <name>` finds ours.
const netnsDir = "/run/netns"

// namespace is one named network namespace the fabric made, with a netlink handle bound to it so that
// links, addresses and routes are changed without moving any thread, and the HTTP servers it listens with.
type namespace struct {
	name    string
	nl      *netlink.Handle
	servers []*http.Server
}

func (n *namespace) path() string { return filepath.Join(netnsDir, n.name) }

// newNamespace creates a named netns. netns.NewNamed moves the calling thread into the new namespace, so
// it runs on a locked thread of its own; if moving back fails the thread stays locked and dies with its
// goroutine instead of carrying the wrong namespace into other goroutines.
func newNamespace(name string) (*namespace, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- result{err: fmt.Errorf("opening current netns: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if rerr := netns.Set(orig); rerr != nil {
			if err == nil {
				h.Close()
			}
			done <- result{err: fmt.Errorf("returning to the original netns: %w", rerr)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{h: h, err: err}
	}()
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("creating netns %s: %w", name, r.err)
	}
	defer r.h.Close()
	h, err := netlink.NewHandleAt(r.h)
	if err != nil {
		_ = deleteNamed(name)
		return nil, fmt.Errorf("opening netlink in netns %s: %w", name, err)
	}
	n := &namespace{name: name, nl: h}
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		n.remove()
		return nil, fmt.Errorf("bringing lo up in netns %s: %w", name, err)
	}
	return n, nil
}

// handle opens the namespace as a file descriptor (for moving a link into it).
func (n *namespace) handle() (netns.NsHandle, error) {
	h, err := netns.GetFromName(n.name)
	if err != nil {
		return 0, fmt.Errorf("opening netns %s: %w", n.name, err)
	}
	return h, nil
}

// remove closes the netlink handle and deletes the name. The kernel frees the namespace, and with it
// every link inside (a veth pair goes when either end goes), once nothing else holds it.
func (n *namespace) remove() error {
	// Their sockets would keep the netns alive.
	for _, s := range n.servers {
		s.Close()
	}
	n.servers = nil
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	return deleteNamed(n.name)
}

// deleteNamed unmounts and removes /run/netns/<name>. A file left unmounted by a crash between creating
// and mounting it is removed too.
func deleteNamed(name string) error {
	p := filepath.Join(netnsDir, name)
	uerr := unix.Unmount(p, unix.MNT_DETACH)
	if err := os.Remove(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("deleting netns %s: %w", name, errors.Join(uerr, err))
	}
	return nil
}

// Do runs fn on an OS thread that is inside the network namespace at nsPath. Sockets fn opens stay in that
// namespace after fn returns and may be used from any goroutine.
func Do(nsPath string, fn func() error) error {
	return ns.WithNetNSPath(nsPath, func(ns.NetNS) error { return fn() })
}

// DialContext returns a dial function that opens its connections inside the namespace at nsPath, for an
// http.Transport or a client that takes a dialer: the dial happens on a thread in that namespace, the
// connection is then usable anywhere.
func DialContext(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := Do(nsPath, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dialing %s from netns %s: %w", addr, nsPath, err)
		}
		return c, nil
	}
}

// HTTPClient is an http.Client whose connections start inside the namespace at nsPath, as a process in
// that namespace would make them.
func HTTPClient(nsPath string) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:       DialContext(nsPath),
			DisableKeepAlives: true,
		},
	}
}

// serve opens a listener inside the namespace and serves h on it from an ordinary goroutine: the socket
// belongs to the namespace it was opened in. remove stops it. connContext, when not nil, is the server's
// ConnContext (IMDS's, which sets the IP TTL of its token answers).
func (n *namespace) serve(addr netip.AddrPort, h http.Handler, connContext func(context.Context, net.Conn) context.Context) error {
	l, err := Listen(n.path(), "tcp4", addr.String())
	if err != nil {
		return err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: connContext}
	n.servers = append(n.servers, s)
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.Close()
		}
	}()
	return nil
}

// Listen opens a listener inside the namespace at nsPath.
func Listen(nsPath, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(nsPath, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in netns %s: %w", addr, nsPath, err)
	}
	return l, nil
}

// writeSysctls sets sysctls (keys like "net/ipv4/ip_forward") inside the namespace at nsPath. /proc/sys/net
// shows the namespace of the thread that opens it.
func writeSysctls(nsPath string, kv [][2]string) error {
	return Do(nsPath, func() error {
		for _, p := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", p[0]), []byte(p[1]), 0o644); err != nil {
				return fmt.Errorf("setting %s=%s: %w", strings.ReplaceAll(p[0], "/", "."), p[1], err)
			}
		}
		return nil
	})
}

// Cleanup deletes every named network namespace whose name starts with prefix: the leftovers of a run
// that crashed before Close. Links inside them go with them.
func Cleanup(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("cleaning up netns: empty prefix would match everything")
	}
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", netnsDir, err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := deleteNamed(e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
