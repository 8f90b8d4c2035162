package cnitest

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// NewNS makes a named network namespace with lo up, removed when the test ends. Names are random
// (testutils), so parallel tests and packages never collide.
func NewNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating network namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	err = n.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		t.Fatalf("setting lo up: %v", err)
	}
	return n
}

// NewNode makes a namespace that plays the node: forwarding on (pod -> pod goes through it) and addr/32 on lo
// as the node's own address.
func NewNode(t testing.TB, addr string) ns.NetNS {
	t.Helper()
	n := NewNS(t)
	err := n.Do(func(ns.NetNS) error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return fmt.Errorf("enabling forwarding: %w", err)
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		a, err := netlink.ParseAddr(addr + "/32")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, a)
	})
	if err != nil {
		t.Fatalf("preparing node namespace: %v", err)
	}
	return n
}

// Links lists the names of links in n that start with prefix.
func Links(t testing.TB, n ns.NetNS, prefix string) []string {
	t.Helper()
	var out []string
	err := n.Do(func(ns.NetNS) error {
		links, err := netlinkdump.Links(nil)
		if err != nil {
			return err
		}
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, prefix) {
				out = append(out, l.Attrs().Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing links: %v", err)
	}
	return out
}

// LinksGone waits until n holds no link whose name starts with prefix, polling until within has passed, and
// returns what is left then (nil when all went). The agent removes host veths in the background after DEL,
// and the pod's end goes with its host end.
func LinksGone(t testing.TB, n ns.NetNS, prefix string, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := Links(t, n, prefix)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Serve listens on addr (TCP, "ip" for any port or "ip:port") inside n and answers every connection with reply,
// until the test ends. It returns the address it listens on.
func Serve(t testing.TB, n ns.NetNS, addr, reply string) string {
	t.Helper()
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "0")
	}
	var l net.Listener
	err := n.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, reply)
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// Fetch connects from inside n to addr and returns what the server sent.
func Fetch(n ns.NetNS, addr string) (string, error) {
	var c net.Conn
	err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 3*time.Second)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("reading from %s: %w", addr, err)
	}
	return string(b), nil
}
