package nodenet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/internal/linktest"
)

// testNode runs the production datapath (BPF programs and the masquerade rule) in a node namespace wired
// to a "vpc" namespace that routes like the VPC, with one pod on a secondary ENI:
//
//	pod 10.0.1.20 -- eniwpod0 [node] eth0 10.0.0.10 (primary) -- vpc0 10.0.0.1 [vpc, lo: the addresses given]
//	                          [node] ens6 10.0.1.5 (ENI, subnet 10.0.1.0/24) -- vpc1 10.0.1.1
//
// The node is opened with the VPC's first block only (IMDS at start), and the SNAT settings snatEnv gives.
type testNode struct {
	node, vpc, pod ns.NetNS
	b              *BPF
	podIP          netip.Addr
	primaryIP      netip.Addr // eth0's
	eniIP          netip.Addr // the secondary ENI's own (primary) address
}

func newTestNode(t *testing.T, snatEnv func(string) string, vpcAddrs ...netip.Addr) *testNode {
	t.Helper()
	node, pinRoot := nodeNS(t)
	n := &testNode{node: node, podIP: netip.MustParseAddr("10.0.1.20"), primaryIP: netip.MustParseAddr("10.0.0.10"),
		eniIP: netip.MustParseAddr("10.0.1.5")}
	for _, p := range []*ns.NetNS{&n.vpc, &n.pod} {
		x, err := testutils.NewNS()
		if err != nil {
			t.Fatalf("creating a netns: %v", err)
		}
		t.Cleanup(func() { _ = x.Close(); _ = testutils.UnmountNS(x) })
		*p = x
	}

	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	primaryMAC, _ := net.ParseMAC("02:00:00:00:20:01")
	eniMAC, _ := net.ParseMAC("02:00:00:00:20:02")
	eni := dptypes.ENI{ID: "eni-2", MAC: eniMAC, DeviceIndex: 1, Subnet: netip.MustParsePrefix("10.0.1.0/24"), Gateway: netip.MustParseAddr("10.0.1.1")}
	p := dptypes.Pod{ContainerID: "c1", IfName: "eth0", IP: n.podIP, HostVeth: "eniwpod0", ENI: eni}

	var hostMAC net.HardwareAddr
	n.in(t, n.node, "building the node", func() error {
		for _, v := range []struct {
			name, peer string
			mac        net.HardwareAddr
			peerNS     ns.NetNS
		}{{"eth0", "vpc0", primaryMAC, n.vpc}, {"ens6", "vpc1", eniMAC, n.vpc}, {p.HostVeth, "eth0", nil, n.pod}} {
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v.name, HardwareAddr: v.mac, MTU: 1500}, PeerName: v.peer,
				PeerNamespace: netlink.NsFd(int(v.peerNS.Fd()))}
			if err := netlink.LinkAdd(veth); err != nil {
				return fmt.Errorf("adding veth %s: %w", v.name, err)
			}
		}
		prim, err := linktest.Up("eth0", n.primaryIP.String()+"/24")
		if err != nil {
			return err
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: prim.Attrs().Index, Gw: net.ParseIP("10.0.0.1")}); err != nil {
			return fmt.Errorf("adding the default route: %w", err)
		}
		if _, err := linktest.Up("lo", ""); err != nil {
			return err
		}
		hv, err := linktest.Up(p.HostVeth, "")
		if err != nil {
			return err
		}
		hostMAC = hv.Attrs().HardwareAddr
		n.b, err = Open(ctx, Config{
			PinRoot: pinRoot, PrimaryMAC: primaryMAC.String(), PrimaryIP: n.primaryIP,
			VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, MaxPods: 29,
			IMDS: primaryIPs{eniMAC.String(): n.eniIP}, Logger: log, SNATEnv: snatEnv,
		})
		if err != nil {
			return fmt.Errorf("Open: %w", err)
		}
		if err := n.b.Attach(ctx, nil, nil); err != nil {
			return fmt.Errorf("Attach: %w", err)
		}
		if err := n.b.ENIUp(ctx, eni); err != nil {
			return err
		}
		return n.b.PodUp(ctx, p)
	})
	t.Cleanup(func() {
		n.in(t, n.node, "uninstalling", func() error {
			_ = n.b.Close()
			return Uninstall(ctx, pinRoot, log)
		})
	})
	n.in(t, n.pod, "plumbing the pod as the CNI plugin does", func() error {
		l, err := linktest.Up("eth0", n.podIP.String()+"/32")
		if err != nil {
			return err
		}
		gw := net.IPv4(169, 254, 1, 1)
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
			return err
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw}); err != nil {
			return err
		}
		return netlink.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: gw, HardwareAddr: hostMAC, State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V4})
	})
	n.in(t, n.vpc, "building the vpc", func() error {
		for name, cidr := range map[string]string{"vpc0": "10.0.0.1/24", "vpc1": "10.0.1.1/24"} {
			if _, err := linktest.Up(name, cidr); err != nil {
				return err
			}
		}
		lo, err := linktest.Up("lo", "")
		if err != nil {
			return err
		}
		for _, a := range vpcAddrs {
			if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
				return err
			}
		}
		return nil
	})
	return n
}

// in runs f in namespace x, failing the test on error.
func (n *testNode) in(t *testing.T, x ns.NetNS, what string, f func() error) {
	t.Helper()
	if err := x.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sourceSeen sends datagrams from the pod to dst until a listener there in namespace at gets one, for up
// to within, and returns the source it saw (false when nothing arrived).
func (n *testNode) sourceSeen(t *testing.T, at ns.NetNS, dst netip.AddrPort, within time.Duration) (netip.Addr, bool) {
	t.Helper()
	var srv net.PacketConn
	n.in(t, at, "listening", func() (err error) {
		srv, err = net.ListenPacket("udp4", dst.String())
		return err
	})
	defer srv.Close()
	var c *net.UDPConn
	n.in(t, n.pod, "dialing", func() (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		return err
	})
	defer c.Close()
	buf := make([]byte, 64)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		_, _ = c.Write([]byte("hello"))
		_ = srv.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, from, err := srv.ReadFrom(buf); err == nil {
			return from.(*net.UDPAddr).AddrPort().Addr().Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// rxOnENI counts the packets the vpc received from the pod's ENI.
func (n *testNode) rxOnENI(t *testing.T) uint64 {
	t.Helper()
	var rx uint64
	n.in(t, n.vpc, "reading the ENI's counters", func() error {
		l, err := netlink.LinkByName("vpc1")
		if err == nil {
			rx = l.Attrs().Statistics.RxPackets
		}
		return err
	})
	return rx
}
