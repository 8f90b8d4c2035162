package datapath

import (
	"crypto/rand"
	"encoding/binary"
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
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	if err := n.Do(func(ns.NetNS) error {
		for _, i := range ifindexes {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("dpt%d", i), Index: i}, PeerName: fmt.Sprintf("dpt%dp", i)}
			if err := netlink.LinkAdd(l); err != nil {
				return fmt.Errorf("adding a veth at ifindex %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	protoICMP = 1
	protoTCP  = 6
	protoUDP  = 17
)

// frame builds an Ethernet + IPv4 + UDP/TCP/ICMP-echo packet. The programs ignore checksums.
func frame(src, dst netip.Addr, proto uint8, sport, dport uint16) []byte {
	var l4 []byte
	switch proto {
	case protoUDP:
		l4 = make([]byte, 8+16)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	case protoTCP:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		l4[12] = 5 << 4
	case protoICMP:
		l4 = make([]byte, 8)
		l4[0] = 8 // echo request
		binary.BigEndian.PutUint16(l4[4:], sport)
	}
	pkt := make([]byte, 14+20+len(l4))
	copy(pkt[0:6], []byte{0x02, 0, 0, 0, 0, 0x01})
	copy(pkt[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(pkt[12:], 0x0800)
	ip := pkt[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
	ip[8] = 64
	ip[9] = proto
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	copy(ip[20:], l4)
	return pkt
}

// arpFrame is a minimal ARP request: not IPv4.
func arpFrame() []byte {
	pkt := make([]byte, 14+28)
	copy(pkt[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	binary.BigEndian.PutUint16(pkt[12:], 0x0806)
	return pkt
}

// badHeaderFrame is an IPv4 packet whose header length field (ihl 4) is shorter than any IPv4 header.
// (BPF_PROG_TEST_RUN refuses frames shorter than a 20-byte IPv4 header, so this is how a truncated header
// reaches the program under test.)
func badHeaderFrame(src, dst netip.Addr) []byte {
	pkt := frame(src, dst, protoUDP, 1, 2)
	pkt[14] = 0x44
	return pkt
}

// cutFrame is a packet cut short inside its L4 header: two bytes of TCP.
func cutFrame(src, dst netip.Addr) []byte {
	return frame(src, dst, protoTCP, 1, 2)[:14+20+2]
}

func addr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// testLogger sends the datapath's state-change lines to the test's output, shown only on failure or -v.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
