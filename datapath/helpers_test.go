package datapath

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf/rlimit"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/testenv"
)

// testPinRoot returns a bpffs directory unique to this test run, removed with everything in it when the
// test ends.
func testPinRoot(t testing.TB) string {
	t.Helper()
	testenv.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatalf("removing memlock limit: %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	base := fmt.Sprintf("/sys/fs/bpf/eniwire-datapath-test-%d-%s", os.Getpid(), hex.EncodeToString(b))
	if _, err := os.Stat("/sys/fs/bpf"); err != nil {
		testenv.Unavailable(t, "bpffs is not mounted at /sys/fs/bpf")
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	return filepath.Join(base, "v1")
}

// openTest opens a Datapath on a unique pin root and uninstalls it when the test ends.
func openTest(t testing.TB, cfg Config) *Datapath {
	t.Helper()
	if cfg.PinRoot == "" {
		cfg.PinRoot = testPinRoot(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	d, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		_ = d.Close()
		_ = Uninstall(cfg.PinRoot)
	})
	return d
}

// runNS returns a network namespace of the test's own holding a veth whose end sits at each of the given
// ifindexes (veths, as the dummy driver may be missing): BPF_PROG_TEST_RUN makes a packet arrive on a
// device only if it exists in the caller's namespace.
func runNS(t testing.TB, ifindexes ...int) ns.NetNS {
	t.Helper()
	n, err := newRunNS(ifindexes...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeRunNS(n) })
	return n
}

// newRunNS is runNS for a caller that closes the namespace itself (closeRunNS).
func newRunNS(ifindexes ...int) (ns.NetNS, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, fmt.Errorf("creating netns: %w", err)
	}
	if err := n.Do(func(ns.NetNS) error {
		for _, i := range ifindexes {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("dpt%d", i), Index: i}, PeerName: fmt.Sprintf("dpt%dp", i)}
			if err := netlink.LinkAdd(l); err != nil {
				return fmt.Errorf("adding a veth at ifindex %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		closeRunNS(n)
		return nil, err
	}
	return n, nil
}

func closeRunNS(n ns.NetNS) { _ = n.Close(); _ = testutils.UnmountNS(n) }

func addr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// testLogger sends the datapath's state-change lines to the test's output, shown only on failure or -v.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
