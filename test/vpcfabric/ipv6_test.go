package vpcfabric

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// TestRouterRoutesIPv6AndChecksItsSources: the router follows the simulator's IPv6 assignments made
// through the real SDK (a /80 prefix and an address on the primary ENI are routed through its veth, and
// unrouted when unassigned); its source/destination check applies to IPv6 (a node sending from an IPv6
// address its ENI does not hold is dropped by the VPC, from one it holds is not); the internet host is
// reachable over IPv6 through an egress-only gateway that lets no flow in; a smaller hop answers Packet Too
// Big.
func TestRouterRoutesIPv6AndChecksItsSources(t *testing.T) {
	w := newWorldWith(t, func(sim *ec2sim.Sim) error {
		if _, err := sim.AddVPCIPv6Block(vpcID, "2600:1f14:e0::/56"); err != nil {
			return err
		}
		_, err := sim.AddSubnetIPv6Block(subnetID, "2600:1f14:e0:1::/64")
		return err
	})
	ctx := waitCtx(t)
	api := w.ec2Client()
	eniID := w.inst.PrimaryENI

	prefixes, err := api.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eniID), Ipv6PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatalf("assigning an IPv6 prefix: %v", err)
	}
	if len(prefixes.AssignedIpv6Prefixes) != 1 {
		t.Fatalf("assigned %v, want one /80", prefixes.AssignedIpv6Prefixes)
	}
	prefix80 := netip.MustParsePrefix(prefixes.AssignedIpv6Prefixes[0])
	addrs, err := api.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eniID), Ipv6AddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatalf("assigning an IPv6 address: %v", err)
	}
	held := netip.MustParseAddr(addrs.AssignedIpv6Addresses[0])
	for _, p := range []netip.Prefix{prefix80, netip.PrefixFrom(held, 128)} {
		if err := w.fab.waitFor(ctx, "IPv6 route "+p.String(), func() bool { return w.fab.routes[p] == eniID }); err != nil {
			t.Fatal(err)
		}
	}
	routes, err := w.fab.RouterRoutes(eniID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(routes, prefix80) || !slices.Contains(routes, netip.PrefixFrom(held, 128)) {
		t.Errorf("routes via the primary ENI's veth = %v, want %s and %s/128 among them", routes, prefix80, held)
	}

	nl, err := netlink.NewHandleAt(mustNS(t, w.node.NetnsPath))
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()

	t.Run("the VPC drops an IPv6 source its ENI does not hold, and passes one it holds", func(t *testing.T) {
		forged := netip.MustParseAddr("2600:1f14:e0:1::dead")
		eth0, err := nl.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []netip.Addr{held, forged} {
			if err := nl.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, 128)), Flags: unix.IFA_F_NODAD}); err != nil {
				t.Fatal(err)
			}
		}
		somewhere := netip.AddrPortFrom(netip.MustParseAddr("2600:1f14:e0:2::9"), 9) // beyond the router
		send := func(from netip.Addr) uint64 {
			t.Helper()
			before, err := w.fab.SourceCheckDrops()
			if err != nil {
				t.Fatal(err)
			}
			if err := Do(w.node.NetnsPath, func() error {
				c, err := net.DialUDP("udp6", &net.UDPAddr{IP: from.AsSlice()}, net.UDPAddrFromAddrPort(somewhere))
				if err != nil {
					return err
				}
				defer c.Close()
				for range 3 {
					_, _ = c.Write([]byte("eniwire"))
					time.Sleep(50 * time.Millisecond)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			after, err := w.fab.SourceCheckDrops()
			if err != nil {
				t.Fatal(err)
			}
			return after - before
		}
		// The node resolves the router first (its neighbour solicitation leaves from the packet's source
		// while the node's link-local address is still tentative).
		deadline := time.Now().Add(10 * time.Second)
		for !routerResolved(t, nl, eth0.Attrs().Index) {
			if time.Now().After(deadline) {
				t.Fatal("the node never resolved the router's fe80::1")
			}
			send(held)
		}
		if n := send(held); n != 0 {
			t.Errorf("the VPC dropped %d packets from %s, an address of the ENI", n, held)
		}
		if n := send(forged); n == 0 {
			t.Errorf("the VPC let packets from %s, no address of the ENI, through", forged)
		}
	})

	t.Run("the internet host is reachable over IPv6 through the egress-only gateway", func(t *testing.T) {
		inet := w.fab.Internet()
		addr, peers := echoServer(t, inet.NetnsPath, inet.IPv6)
		if err := dialFrom(w.node.NetnsPath, held, "", addr, 5*time.Second); err != nil {
			t.Fatalf("connecting from %s to the internet host %s: %v", held, addr, err)
		}
		if got := <-peers; got != held {
			t.Errorf("the internet host saw source %s, want %s (IPv6 is not translated)", got, held)
		}
	})

	t.Run("the internet cannot open a flow into the VPC over IPv6", func(t *testing.T) {
		before, err := w.fab.EgressOnlyDrops()
		if err != nil {
			t.Fatal(err)
		}
		addr, peers := echoServer(t, w.node.NetnsPath, held)
		if err := dialFrom(w.fab.Internet().NetnsPath, netip.Addr{}, "", addr, 500*time.Millisecond); err == nil {
			t.Errorf("the internet host opened a connection to %s", addr)
		}
		select {
		case p := <-peers:
			t.Errorf("the node accepted a connection from %s", p)
		default:
		}
		if after, err := w.fab.EgressOnlyDrops(); err != nil || after == before {
			t.Errorf("egress-only drops %d -> %d (%v), want more", before, after, err)
		}
	})

	t.Run("a 1280-byte hop answers Packet Too Big, as the VPC does not fragment IPv6", func(t *testing.T) {
		if err := w.fab.SetVPCHostHopMTU(1280); err != nil {
			t.Fatal(err)
		}
		dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.fab.VPCHost().IPv6, 9))
		deadline := time.Now().Add(5 * time.Second)
		for {
			var mtu int
			if err := Do(w.node.NetnsPath, func() error {
				c, err := net.DialUDP("udp6", &net.UDPAddr{IP: held.AsSlice()}, dst)
				if err != nil {
					return err
				}
				defer c.Close()
				_, _ = c.Write(make([]byte, 1400))
				time.Sleep(50 * time.Millisecond)
				routes, err := nl.RouteGet(dst.IP)
				if err == nil && len(routes) == 1 {
					mtu = routes[0].MTU
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if mtu == 1280 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the node's route to %s has MTU %d, want 1280 learnt from Packet Too Big", dst.IP, mtu)
			}
		}
	})

	t.Run("unassigning the prefix removes its route", func(t *testing.T) {
		if _, err := api.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(eniID), Ipv6Prefixes: []string{prefix80.String()}}); err != nil {
			t.Fatalf("unassigning: %v", err)
		}
		if err := w.fab.waitFor(ctx, "IPv6 prefix route gone", func() bool { return w.fab.routes[prefix80] == "" }); err != nil {
			t.Fatal(err)
		}
		if routes, _ := w.fab.RouterRoutes(eniID); slices.Contains(routes, prefix80) {
			t.Errorf("routes via the ENI's veth still hold %s: %v", prefix80, routes)
		}
	})
}

// routerResolved says whether the node has a neighbour entry for the router's IPv6 address that it can send to.
func routerResolved(t *testing.T, nl *netlink.Handle, linkIndex int) bool {
	t.Helper()
	neighs, err := nl.NeighList(linkIndex, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range neighs {
		if n.IP.Equal(routerIPv6.AsSlice()) && n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE) != 0 {
			return true
		}
	}
	return false
}
