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

// TestABlockAddedToTheVPCLeavesUntranslated runs the production datapath (BPF programs and the masquerade
// rule) in a node namespace wired to a "vpc" namespace that routes like the VPC:
//
//	pod 10.0.1.20 -- eniwpod0 [node] eth0 10.0.0.10 (primary) -- vpc0 10.0.0.1 [vpc, lo 100.64.9.9 and 198.51.100.7]
//	                          [node] ens6 (ENI, subnet 10.0.1.0/24) -- vpc1 10.0.1.1
//
// The node is opened with the VPC's first block only (IMDS at start). Traffic to 100.64.9.9 then takes the
// host's default route and is masqueraded to the primary IP. Once SetVPCCIDRs adds 100.64.0.0/16 (the
// controller saw it in DescribeVpcs), that traffic leaves by the pod's ENI with the pod's own address, while
// traffic to the internet side (198.51.100.7) is still masqueraded.
func TestABlockAddedToTheVPCLeavesUntranslated(t *testing.T) {
	node, pinRoot := nodeNS(t)
	vpc, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating the vpc netns: %v", err)
	}
	t.Cleanup(func() { _ = vpc.Close(); _ = testutils.UnmountNS(vpc) })
	pod, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating the pod netns: %v", err)
	}
	t.Cleanup(func() { _ = pod.Close(); _ = testutils.UnmountNS(pod) })

	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	primaryMAC, _ := net.ParseMAC("02:00:00:00:20:01")
	eniMAC, _ := net.ParseMAC("02:00:00:00:20:02")
	eni := dptypes.ENI{ID: "eni-2", MAC: eniMAC.String(), DeviceIndex: 1, SubnetCIDR: "10.0.1.0/24", Gateway: "10.0.1.1"}
	podIP := netip.MustParseAddr("10.0.1.20")
	p := dptypes.Pod{ContainerID: "c1", IfName: "eth0", IP: podIP.String(), HostVeth: "eniwpod0", ENI: eni}
	secondary := netip.MustParseAddrPort("100.64.9.9:7000")
	internet := netip.MustParseAddrPort("198.51.100.7:7000")
	primaryIP := netip.MustParseAddr("10.0.0.10")

	in := func(n ns.NetNS, what string, f func() error) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var b *BPF
	var hostMAC net.HardwareAddr
	in(node, "building the node", func() error {
		for _, v := range []struct {
			name, peer string
			mac        net.HardwareAddr
			peerNS     ns.NetNS
		}{{"eth0", "vpc0", primaryMAC, vpc}, {"ens6", "vpc1", eniMAC, vpc}, {p.HostVeth, "eth0", nil, pod}} {
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v.name, HardwareAddr: v.mac, MTU: 1500}, PeerName: v.peer,
				PeerNamespace: netlink.NsFd(int(v.peerNS.Fd()))}
			if err := netlink.LinkAdd(veth); err != nil {
				return fmt.Errorf("adding veth %s: %w", v.name, err)
			}
		}
		prim, err := linktest.Up("eth0", "10.0.0.10/24")
		if err != nil {
			return err
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: prim.Attrs().Index, Gw: net.ParseIP("10.0.0.1")}); err != nil {
			return fmt.Errorf("adding the default route: %w", err)
		}
		hv, err := linktest.Up(p.HostVeth, "")
		if err != nil {
			return err
		}
		hostMAC = hv.Attrs().HardwareAddr
		b, err = Open(ctx, Config{
			PinRoot: pinRoot, PrimaryMAC: primaryMAC.String(), PrimaryIP: primaryIP,
			VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, MaxPods: 29,
			IMDS: primaryIPs{eniMAC.String(): netip.MustParseAddr("10.0.1.5")}, Logger: log,
			SNATEnv: func(string) string { return "" },
		})
		if err != nil {
			return fmt.Errorf("Open: %w", err)
		}
		if err := b.Attach(ctx, nil, nil); err != nil {
			return fmt.Errorf("Attach: %w", err)
		}
		if err := b.ENIUp(ctx, eni); err != nil {
			return err
		}
		return b.PodUp(ctx, p)
	})
	t.Cleanup(func() {
		in(node, "uninstalling", func() error {
			_ = b.Close()
			return Uninstall(ctx, pinRoot, log)
		})
	})
	in(pod, "plumbing the pod as the CNI plugin does", func() error {
		l, err := linktest.Up("eth0", podIP.String()+"/32")
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
	in(vpc, "building the vpc", func() error {
		for name, cidr := range map[string]string{"vpc0": "10.0.0.1/24", "vpc1": "10.0.1.1/24"} {
			if _, err := linktest.Up(name, cidr); err != nil {
				return err
			}
		}
		lo, err := linktest.Up("lo", "")
		if err != nil {
			return err
		}
		for _, a := range []netip.AddrPort{secondary, internet} {
			if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
				return err
			}
		}
		return nil
	})

	// sourceSeen sends datagrams from the pod to dst until the vpc namespace's listener there gets one, and
	// returns the source it saw.
	sourceSeen := func(t *testing.T, dst netip.AddrPort) netip.Addr {
		t.Helper()
		var srv net.PacketConn
		in(vpc, "listening", func() (err error) {
			srv, err = net.ListenPacket("udp4", dst.String())
			return err
		})
		defer srv.Close()
		var c *net.UDPConn
		in(pod, "dialing", func() (err error) {
			c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
			return err
		})
		defer c.Close()
		buf := make([]byte, 64)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			_, _ = c.Write([]byte("hello"))
			_ = srv.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, from, err := srv.ReadFrom(buf); err == nil {
				return from.(*net.UDPAddr).AddrPort().Addr().Unmap()
			}
		}
		t.Fatalf("nothing from the pod reached %s", dst)
		return netip.Addr{}
	}

	t.Run("before: a block unknown to the datapath is masqueraded like the internet", func(t *testing.T) {
		if src := sourceSeen(t, secondary); src != primaryIP {
			t.Fatalf("%s saw source %s, want the primary IP %s", secondary, src, primaryIP)
		}
	})
	// The masquerade rule is written in the namespace of the calling thread: the node's, as in the agent.
	in(node, "setting the VPC's blocks", func() error {
		return b.SetVPCCIDRs(ctx, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")})
	})
	// rxOnENI counts the packets the vpc received from the pod's ENI.
	rxOnENI := func() uint64 {
		var n uint64
		in(vpc, "reading the ENI's counters", func() error {
			l, err := netlink.LinkByName("vpc1")
			if err == nil {
				n = l.Attrs().Statistics.RxPackets
			}
			return err
		})
		return n
	}
	t.Run("after SetVPCCIDRs: the new block sees the pod's own address, by the pod's ENI", func(t *testing.T) {
		before := rxOnENI()
		if src := sourceSeen(t, secondary); src != podIP {
			t.Fatalf("%s saw source %s, want the pod's %s", secondary, src, podIP)
		}
		if rxOnENI() == before {
			t.Fatalf("the datagram did not leave by the pod's ENI")
		}
	})
	t.Run("after SetVPCCIDRs: the internet side is still masqueraded", func(t *testing.T) {
		if src := sourceSeen(t, internet); src != primaryIP {
			t.Fatalf("%s saw source %s, want the primary IP %s", internet, src, primaryIP)
		}
	})
}
