package vpcfabric

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// TestSecondaryENIFollowsTheSimulator walks one ENI through its life with the real SDK against the EC2
// endpoint inside the node netns, and checks the kernel after each step, including EC2's source/dest
// check and the internet gateway's source filter.
func TestSecondaryENIFollowsTheSimulator(t *testing.T) {
	w := newWorld(t)
	top := t
	ctx := waitCtx(t)
	api := w.ec2Client()
	nl, err := netlink.NewHandleAt(mustNS(t, w.node.NetnsPath))
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()

	var eniID, mac, attachmentID string
	var secondary, podIP netip.Addr
	var pod *podBehind
	gw := netip.MustParseAddr("10.0.1.1")
	vpcHost, inet := w.fab.VPCHost(), w.fab.Internet()

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"attaching a second ENI through the SDK gives the node eth1 with its MAC, down and bare", func(t *testing.T) {
			created, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(w.inst.SubnetID)})
			if err != nil {
				t.Fatalf("creating ENI: %v", err)
			}
			eniID, mac = aws.ToString(created.NetworkInterface.NetworkInterfaceId), aws.ToString(created.NetworkInterface.MacAddress)
			att, err := api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
				DeviceIndex: aws.Int32(1), InstanceId: aws.String(w.inst.ID), NetworkInterfaceId: aws.String(eniID)})
			if err != nil {
				t.Fatalf("attaching ENI: %v", err)
			}
			attachmentID = aws.ToString(att.AttachmentId)
			if err := w.fab.WaitENI(ctx, w.inst.ID, mac); err != nil {
				t.Fatal(err)
			}
			link, err := nl.LinkByName("eth1")
			if err != nil {
				t.Fatal(err)
			}
			if got := link.Attrs().HardwareAddr.String(); got != mac {
				t.Errorf("eth1 MAC = %s, want %s", got, mac)
			}
			if link.Attrs().Flags&net.FlagUp != 0 {
				t.Errorf("eth1 is up; the fabric must leave it to the agent")
			}
			if got := link.Attrs().MTU; got != 9001 {
				t.Errorf("eth1 MTU = %d, want 9001", got)
			}
			if addrs, _ := nl.AddrList(link, netlink.FAMILY_V4); len(addrs) != 0 {
				t.Errorf("eth1 has addresses %v, want none", addrs)
			}
		}},
		{"a bare eth1 resolves the gateway, as EC2's router answers every ARP request", func(t *testing.T) {
			link, err := nl.LinkByName("eth1")
			if err != nil {
				t.Fatal(err)
			}
			if err := nl.LinkSetUp(link); err != nil {
				t.Fatal(err)
			}
			routeVia(t, nl, link, gw, vpcHost.IP)
			// A datagram out of the address-less eth1 makes the node ask for the gateway from its primary IP,
			// which the router does not route through this ENI.
			err = Do(w.node.NetnsPath, func() error {
				c, err := bindToDevice("eth1").Dial("udp4", netip.AddrPortFrom(vpcHost.IP, 9).String())
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte("arp"))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				neighs, err := nl.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(neighs, func(n netlink.Neigh) bool {
					return n.IP.Equal(gw.AsSlice()) && n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE) != 0
				})
				if i >= 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("eth1 never resolved the gateway %s: %v", gw, neighs)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}},
		{"assigning a secondary IP routes it through that ENI in the vpc netns", func(t *testing.T) {
			out, err := api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
				NetworkInterfaceId: aws.String(eniID), SecondaryPrivateIpAddressCount: aws.Int32(1)})
			if err != nil {
				t.Fatalf("assigning IP: %v", err)
			}
			if len(out.AssignedPrivateIpAddresses) != 1 {
				t.Fatalf("assigned %d IPs, want 1", len(out.AssignedPrivateIpAddresses))
			}
			secondary = netip.MustParseAddr(aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress))
			if err := w.fab.WaitIP(ctx, secondary); err != nil {
				t.Fatal(err)
			}
			routes, err := w.fab.RouterRoutes(eniID)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(routes, netip.PrefixFrom(secondary, 32)) {
				t.Errorf("routes via the ENI's veth = %v, want %s/32 among them", routes, secondary)
			}
			if got := w.fab.RouteOf(netip.PrefixFrom(w.node.PrimaryIP, 32)); got != w.inst.PrimaryENI {
				t.Errorf("the primary IP is routed to %q, want the primary ENI %s", got, w.inst.PrimaryENI)
			}
			checkDelivery(t, w.fab, eniID, mac)
		}},
		{"the secondary IP leaving by its own ENI reaches the VPC host", func(t *testing.T) {
			configureSecondary(t, nl, secondary, gw, vpcHost.IP, inet.IP)
			addr, peers := echoServer(t, vpcHost.NetnsPath, vpcHost.IP)
			rx0, _, err := w.fab.ENICounters(eniID)
			if err != nil {
				t.Fatal(err)
			}
			if err := dialFrom(w.node.NetnsPath, secondary, "eth1", addr, 5*time.Second); err != nil {
				t.Fatalf("connecting from %s out of eth1: %v", secondary, err)
			}
			if got := <-peers; got != secondary {
				t.Errorf("VPC host saw source %s, want %s", got, secondary)
			}
			if rx1, _, _ := w.fab.ENICounters(eniID); rx1 <= rx0 {
				t.Errorf("the ENI's router-side rx counter stayed at %d", rx1)
			}
		}},
		{"a secondary IP held by a pod behind the node is delivered to the ENI's MAC without ARP", func(t *testing.T) {
			out, err := api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
				NetworkInterfaceId: aws.String(eniID), SecondaryPrivateIpAddressCount: aws.Int32(1)})
			if err != nil || len(out.AssignedPrivateIpAddresses) != 1 {
				t.Fatalf("assigning IP: %v %v", out, err)
			}
			podIP = netip.MustParseAddr(aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress))
			if err := w.fab.WaitIP(ctx, podIP); err != nil {
				t.Fatal(err)
			}
			pod = newPodBehind(t, top, w, nl)
			pod.hold(t, nl, podIP)
			addr, peers := echoServer(t, pod.ns.path(), podIP)
			_, tx0, err := w.fab.ENICounters(eniID)
			if err != nil {
				t.Fatal(err)
			}
			if err := dialFrom(vpcHost.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
				t.Fatalf("connecting from the VPC host to the pod at %s: %v", podIP, err)
			}
			if got := <-peers; got != vpcHost.IP {
				t.Errorf("the pod saw source %s, want the VPC host %s", got, vpcHost.IP)
			}
			if _, tx1, _ := w.fab.ENICounters(eniID); tx1 <= tx0 {
				t.Errorf("the router delivered nothing to the ENI (tx stayed at %d)", tx1)
			}
			checkDelivery(t, w.fab, eniID, mac, podIP)
		}},
		{"the secondary IP leaving by the primary ENI is dropped by the source/dest check", func(t *testing.T) {
			addr, peers := echoServer(t, vpcHost.NetnsPath, vpcHost.IP)
			// The primary IP talks first, so that the drop counted below can only be the spoofed SYN.
			if err := dialFrom(w.node.NetnsPath, netip.Addr{}, "eth0", addr, 5*time.Second); err != nil {
				t.Fatalf("connecting from the primary IP: %v", err)
			}
			if got := <-peers; got != w.node.PrimaryIP {
				t.Fatalf("VPC host saw source %s, want %s", got, w.node.PrimaryIP)
			}
			drops0, err := w.fab.SourceCheckDrops()
			if err != nil {
				t.Fatal(err)
			}
			if err := dialFrom(w.node.NetnsPath, secondary, "eth0", addr, time.Second); err == nil {
				t.Fatalf("a connection from %s out of eth0 got through", secondary)
			}
			drops1, err := w.fab.SourceCheckDrops()
			if err != nil {
				t.Fatal(err)
			}
			if drops1 <= drops0 {
				t.Errorf("source check drops stayed at %d", drops1)
			}
			select {
			case p := <-peers:
				t.Errorf("VPC host accepted a connection from %s", p)
			default:
			}
		}},
		{"the internet host drops a secondary IP's packets", func(t *testing.T) {
			addr, peers := echoServer(t, inet.NetnsPath, inet.IP)
			drops0, err := w.fab.InternetDrops()
			if err != nil {
				t.Fatal(err)
			}
			if err := dialFrom(w.node.NetnsPath, secondary, "eth1", addr, time.Second); err == nil {
				t.Fatalf("a connection from %s reached the internet host", secondary)
			}
			if drops1, _ := w.fab.InternetDrops(); drops1 <= drops0 {
				t.Errorf("internet drops stayed at %d", drops1)
			}
			select {
			case p := <-peers:
				t.Errorf("internet host accepted a connection from %s", p)
			default:
			}
			allowed, err := w.fab.InternetAllowed()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(allowed, []netip.Addr{w.node.PrimaryIP}) {
				t.Errorf("internet host allows %v, want only %s", allowed, w.node.PrimaryIP)
			}
		}},
		{"unassigning the IPs removes their routes and the pod is no longer reached", func(t *testing.T) {
			if _, err := api.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
				NetworkInterfaceId: aws.String(eniID), PrivateIpAddresses: []string{secondary.String(), podIP.String()}}); err != nil {
				t.Fatalf("unassigning IPs: %v", err)
			}
			for _, ip := range []netip.Addr{secondary, podIP} {
				if err := w.fab.WaitIPGone(ctx, ip); err != nil {
					t.Fatal(err)
				}
			}
			routes, err := w.fab.RouterRoutes(eniID)
			if err != nil {
				t.Fatal(err)
			}
			for _, ip := range []netip.Addr{secondary, podIP} {
				if slices.Contains(routes, netip.PrefixFrom(ip, 32)) {
					t.Errorf("routes via the ENI's veth still hold %s: %v", ip, routes)
				}
			}
			addr, peers := echoServer(t, pod.ns.path(), podIP)
			if err := dialFrom(vpcHost.NetnsPath, netip.Addr{}, "", addr, 500*time.Millisecond); err == nil {
				t.Errorf("the VPC host still reaches %s after it was unassigned", podIP)
			}
			select {
			case p := <-peers:
				t.Errorf("the pod accepted a connection from %s at an unassigned address", p)
			default:
			}
		}},
		{"assigning a /28 prefix routes the whole prefix through the ENI", func(t *testing.T) {
			out, err := api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
				NetworkInterfaceId: aws.String(eniID), Ipv4PrefixCount: aws.Int32(1)})
			if err != nil {
				t.Fatalf("assigning prefix: %v", err)
			}
			if len(out.AssignedIpv4Prefixes) != 1 {
				t.Fatalf("assigned %d prefixes, want 1", len(out.AssignedIpv4Prefixes))
			}
			p := netip.MustParsePrefix(aws.ToString(out.AssignedIpv4Prefixes[0].Ipv4Prefix))
			err = w.fab.waitFor(ctx, "prefix route", func() bool { return w.fab.routes[p] == eniID })
			if err != nil {
				t.Fatal(err)
			}
			if routes, _ := w.fab.RouterRoutes(eniID); !slices.Contains(routes, p) {
				t.Errorf("routes via the ENI's veth = %v, want %s among them", routes, p)
			}
			// Two addresses of the prefix, both in the pod: one neighbour entry serves the whole prefix.
			var inPrefix []netip.Addr
			for a := p.Addr().Next(); len(inPrefix) < 2; a = a.Next().Next() {
				inPrefix = append(inPrefix, a)
			}
			for _, ip := range inPrefix {
				pod.hold(t, nl, ip)
				addr, peers := echoServer(t, pod.ns.path(), ip)
				if err := dialFrom(vpcHost.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
					t.Fatalf("connecting from the VPC host to %s of prefix %s: %v", ip, p, err)
				}
				if got := <-peers; got != vpcHost.IP {
					t.Errorf("the pod at %s saw source %s, want %s", ip, got, vpcHost.IP)
				}
			}
			checkDelivery(t, w.fab, eniID, mac, inPrefix...)
		}},
		{"an ENI attached with secondary IPs already on it gets routes for all of them", func(t *testing.T) {
			created, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
				SubnetId: aws.String(w.inst.SubnetID), SecondaryPrivateIpAddressCount: aws.Int32(2)})
			if err != nil {
				t.Fatalf("creating ENI: %v", err)
			}
			id := aws.ToString(created.NetworkInterface.NetworkInterfaceId)
			if _, err := api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
				DeviceIndex: aws.Int32(2), InstanceId: aws.String(w.inst.ID), NetworkInterfaceId: aws.String(id)}); err != nil {
				t.Fatalf("attaching ENI: %v", err)
			}
			if err := w.fab.WaitENI(ctx, w.inst.ID, aws.ToString(created.NetworkInterface.MacAddress)); err != nil {
				t.Fatal(err)
			}
			if len(created.NetworkInterface.PrivateIpAddresses) != 3 {
				t.Fatalf("created ENI has %d IPs, want 3", len(created.NetworkInterface.PrivateIpAddresses))
			}
			for _, a := range created.NetworkInterface.PrivateIpAddresses {
				ip := netip.MustParseAddr(aws.ToString(a.PrivateIpAddress))
				if err := w.fab.WaitIP(ctx, ip); err != nil {
					t.Fatal(err)
				}
				if got := w.fab.RouteOf(netip.PrefixFrom(ip, 32)); got != id {
					t.Errorf("%s is routed to %q, want %s", ip, got, id)
				}
			}
			if _, err := nl.LinkByName("eth2"); err != nil {
				t.Errorf("no eth2 for device index 2: %v", err)
			}
		}},
		{"detaching the ENI removes eth1 and its routes", func(t *testing.T) {
			if _, err := api.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attachmentID)}); err != nil {
				t.Fatalf("detaching ENI: %v", err)
			}
			if err := w.fab.WaitENIGone(ctx, w.inst.ID, mac); err != nil {
				t.Fatal(err)
			}
			if _, err := nl.LinkByName("eth1"); err == nil {
				t.Errorf("eth1 is still in the node netns")
			}
			if _, _, err := w.fab.ENICounters(eniID); err == nil {
				t.Errorf("the detached ENI still has counters")
			}
		}},
		{"terminating the instance removes its node netns", func(t *testing.T) {
			if err := w.sim.TerminateInstance(w.inst.ID); err != nil {
				t.Fatal(err)
			}
			err := w.fab.waitFor(ctx, "node gone", func() bool { return w.fab.nodes[w.inst.ID] == nil })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(w.node.NetnsPath); !os.IsNotExist(err) {
				t.Errorf("node netns %s still exists (%v)", w.node.NetnsPath, err)
			}
			if allowed, _ := w.fab.InternetAllowed(); len(allowed) != 0 {
				t.Errorf("internet host still allows %v", allowed)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
	if err := w.fab.Err(); err != nil {
		t.Errorf("the fabric failed to apply events: %v", err)
	}
}

// configureSecondary does what the agent would for a secondary ENI, minimally: eth1 up with the IP, and
// routes to the test's hosts through eth1 so a socket bound to eth1 finds them.
func configureSecondary(t *testing.T, nl *netlink.Handle, ip, gw netip.Addr, hosts ...netip.Addr) {
	t.Helper()
	link, err := nl.LinkByName("eth1")
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.AddrAdd(link, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(ip, 32))}); err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	routeVia(t, nl, link, gw, hosts...)
}

// routeVia routes each host through link to the gateway, on-link as the ENI may have no subnet address.
func routeVia(t *testing.T, nl *netlink.Handle, link netlink.Link, gw netip.Addr, hosts ...netip.Addr) {
	t.Helper()
	for _, h := range hosts {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.PrefixFrom(h, 32)), Gw: gw.AsSlice(),
			Flags: int(netlink.FLAG_ONLINK)}
		if err := nl.RouteReplace(r); err != nil {
			t.Fatalf("routing %s via %s: %v", h, link.Attrs().Name, err)
		}
	}
}

func TestTwoNodesOfOneSubnetReachEachOther(t *testing.T) {
	w := newWorld(t)
	ctx := waitCtx(t)
	other, err := w.sim.AddInstance(ec2sim.InstanceSpec{Type: "t3.medium", SubnetID: w.inst.SubnetID})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.fab.WaitNode(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fab.WaitENI(ctx, other.ID, other.PrimaryMAC); err != nil {
		t.Fatal(err)
	}
	if err := w.fab.WaitIP(ctx, b.PrimaryIP); err != nil {
		t.Fatal(err)
	}
	addr, peers := echoServer(t, b.NetnsPath, b.PrimaryIP)
	if err := dialFrom(w.node.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
		t.Fatalf("connecting node to node: %v", err)
	}
	if got := <-peers; got != w.node.PrimaryIP {
		t.Errorf("second node saw source %s, want %s", got, w.node.PrimaryIP)
	}
}

func TestCloseLeavesNoNamespace(t *testing.T) {
	w := newWorld(t)
	prefix := w.fab.Name()
	if n := countNetns(t, prefix); n != 5 {
		t.Errorf("%d netns with prefix %s while running, want 5 (vpc, vpchost, inet, onprem, one node)", n, prefix)
	}
	for i := range 2 {
		if err := w.fab.Close(); err != nil {
			t.Fatalf("close #%d: %v", i+1, err)
		}
	}
	if n := countNetns(t, prefix); n != 0 {
		t.Errorf("%d netns with prefix %s left after Close", n, prefix)
	}
	if _, err := w.fab.Node(w.inst.ID); err == nil {
		t.Errorf("Node answered after Close")
	}
}

func countNetns(t *testing.T, prefix string) int {
	t.Helper()
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			n++
		}
	}
	return n
}
