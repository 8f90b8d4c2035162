package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The fabric's IPv6 half, as a VPC with IPv6 lays it out: both pods take an address from the primary
// ENI's /80 prefix (eni1), the node has an address of the subnet's /64 on eni1 and its default route
// through the VPC router (as a router advertisement gives it, accept_ra=2), and the VPC routes the /80 to
// the node's ENI. A pod reaches its gateway as in IPv4: a default route via fe80::1, a permanent neighbour
// entry for it (the host veth's MAC), nothing holding fe80::1 (datapath/doc.go, IPv6).
//
//	pod1 2600:1f14:e0:1:a::21 -- host1 [node] eni1 2600:1f14:e0:1::10 -- vpc1 2600:1f14:e0:1::1 [vpc, lo 2600:1f14:e0:9::9]
//	pod2 2600:1f14:e0:1:a::22 -- host2
var (
	fabricPod1v6  = addr("2600:1f14:e0:1:a::21")
	fabricPod2v6  = addr("2600:1f14:e0:1:a::22")
	fabricNode6   = addr("2600:1f14:e0:1::10")
	fabricRouter6 = addr("2600:1f14:e0:1::1")
	fabricVPCHost = addr("2600:1f14:e0:9::9")
	podGateway6   = net.ParseIP("fe80::1")
)

func addNoDAD(link string, p netip.Prefix) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}, Flags: unix.IFA_F_NODAD}
	if err := netlink.AddrAdd(l, a); err != nil {
		return fmt.Errorf("adding %s to %s: %w", p, link, err)
	}
	return nil
}

func host128(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(128, 128)}
}

// addIPv6 gives the fabric its IPv6 half and the datapath its IPv6 pods.
func (f *fabric) addIPv6(t *testing.T, d *Datapath) {
	t.Helper()
	var hostMACs [2]net.HardwareAddr
	f.nodeDo(t, "giving the node IPv6", func() error {
		if err := sysctls(map[string]string{"net/ipv6/conf/all/forwarding": "1"}); err != nil {
			return err
		}
		if err := addNoDAD("eni1", netip.PrefixFrom(fabricNode6, 64)); err != nil {
			return err
		}
		for i, p := range []struct {
			ip  netip.Addr
			dev int
		}{{fabricPod1v6, f.host1}, {fabricPod2v6, f.host2}} {
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: p.dev, Dst: host128(p.ip)}); err != nil {
				return fmt.Errorf("adding route to %s: %w", p.ip, err)
			}
			l, err := netlink.LinkByIndex(p.dev)
			if err != nil {
				return err
			}
			hostMACs[i] = l.Attrs().HardwareAddr
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: f.eni1, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: fabricRouter6.AsSlice()}); err != nil {
			return fmt.Errorf("adding the IPv6 default route: %w", err)
		}
		if err := d.SetNodeIPs([]netip.Addr{addr("10.77.1.10"), addr("10.77.2.10"), fabricNode6}); err != nil {
			return err
		}
		for _, ip := range []netip.Addr{fabricPod1v6, fabricPod2v6} {
			veth := f.host1
			if ip == fabricPod2v6 {
				veth = f.host2
			}
			if err := d.PutPod(ip, veth, f.eni1); err != nil {
				return err
			}
		}
		return nil
	})
	for i, p := range []struct {
		n  ns.NetNS
		ip netip.Addr
	}{{f.pod1, fabricPod1v6}, {f.pod2, fabricPod2v6}} {
		if err := p.n.Do(func(ns.NetNS) error { return plumbPod6(p.ip, hostMACs[i]) }); err != nil {
			t.Fatalf("giving the pod IPv6: %v", err)
		}
	}
	if err := f.vpc.Do(func(ns.NetNS) error {
		if err := sysctls(map[string]string{"net/ipv6/conf/all/forwarding": "1"}); err != nil {
			return err
		}
		if err := addNoDAD("vpc1", netip.PrefixFrom(fabricRouter6, 64)); err != nil {
			return err
		}
		if err := addNoDAD("lo", netip.PrefixFrom(fabricVPCHost, 128)); err != nil {
			return err
		}
		// The node's /80 is routed to its primary ENI, as the VPC routes an ENI's prefix.
		return netlink.RouteAdd(&netlink.Route{Dst: &net.IPNet{IP: net.ParseIP("2600:1f14:e0:1:a::"), Mask: net.CIDRMask(80, 128)}, Gw: fabricNode6.AsSlice()})
	}); err != nil {
		t.Fatalf("giving the VPC IPv6: %v", err)
	}
}

// plumbPod6 is the pod side of the IPv6 gateway: the pod's /128, a default route via fe80::1 and a
// permanent neighbour entry fe80::1 -> the host veth's MAC.
func plumbPod6(ip netip.Addr, hostMAC net.HardwareAddr) error {
	if err := addNoDAD("eth0", netip.PrefixFrom(ip, 128)); err != nil {
		return err
	}
	l, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := netlink.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: podGateway6, HardwareAddr: hostMAC, State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V6}); err != nil {
		return fmt.Errorf("adding the gateway's neighbour entry: %w", err)
	}
	return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: podGateway6})
}

// TestPacketsFlowOverIPv6ThroughNamespaces: real BPF on a node in network namespaces, over IPv6: pod to
// pod on the node (redirect_peer), pod to a VPC host out of the ENI (redirect_neigh by the FIB's next hop)
// and back (to_pod), a forged source dropped, hop limit 1 answered by the node with ICMPv6 time exceeded,
// and a 1280-byte hop answered with Packet Too Big, which the pod learns.
func TestPacketsFlowOverIPv6ThroughNamespaces(t *testing.T) {
	f := newFabric(t)
	root := testPinRoot(t)
	cfg := f.config(root, AttachAuto)
	cfg.VPCCIDRs = append(cfg.VPCCIDRs, prefix("2600:1f14:e0::/56"))
	d := f.open(t, cfg)
	t.Cleanup(func() {
		_ = d.Close()
		_ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) })
	})
	f.wire(t, d)
	f.addIPv6(t, d)
	serveUDPEcho(t, f.pod2, netip.AddrPortFrom(fabricPod2v6, 7000))
	serveUDPEcho(t, f.vpc, netip.AddrPortFrom(fabricVPCHost, 7000))

	t.Run("pod to pod on the node", func(t *testing.T) {
		before := counterNow(t, d.Reader, VerdictFromPodToPeer)
		if err := udpExchangeSized(f.pod1, netip.Addr{}, netip.AddrPortFrom(fabricPod2v6, 7000), 64, 0, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodToPeer, before+2) // the request and the echo
	})
	t.Run("pod to a VPC host out of the ENI, and back into the pod", func(t *testing.T) {
		out, in := counterNow(t, d.Reader, VerdictFromPodOutENI), counterNow(t, d.Reader, VerdictToPodToPeer)
		if err := udpExchangeSized(f.pod1, netip.Addr{}, netip.AddrPortFrom(fabricVPCHost, 7000), 64, 0, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodOutENI, out+1)
		waitCounter(t, d.Reader, VerdictToPodToPeer, in+1)
	})
	t.Run("a pod sending from another pod's IPv6 address is dropped", func(t *testing.T) {
		if err := f.pod1.Do(func(ns.NetNS) error { return addNoDAD("eth0", netip.PrefixFrom(fabricPod2v6, 128)) }); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictFromPodSpoof)
		if err := udpExchangeSized(f.pod1, fabricPod2v6, netip.AddrPortFrom(fabricVPCHost, 7000), 64, 0, time.Second); err == nil {
			t.Fatal("the VPC host answered a pod sending as another")
		}
		waitCounter(t, d.Reader, VerdictFromPodSpoof, before+1)
	})
	t.Run("hop limit 1 is answered by the node with time exceeded", func(t *testing.T) {
		before, received := counterNow(t, d.Reader, VerdictFromPodTTL), snmp6(t, f.pod1, "Icmp6InTimeExcds")
		if err := udpExchangeSized(f.pod1, fabricPod1v6, netip.AddrPortFrom(fabricVPCHost, 7000), 64, 1, time.Second); err == nil {
			t.Fatal("the VPC host answered a packet with hop limit 1")
		}
		waitCounter(t, d.Reader, VerdictFromPodTTL, before+1)
		// A connected UDP socket is not told of a time exceeded (not a hard error); the pod's stack counts it.
		if got := snmp6(t, f.pod1, "Icmp6InTimeExcds"); got <= received {
			t.Errorf("the pod received no ICMPv6 time exceeded (Icmp6InTimeExcds %d -> %d)", received, got)
		}
	})
	t.Run("a 1280-byte hop answers Packet Too Big, and the pod's traffic fits it after", func(t *testing.T) {
		f.nodeDo(t, "narrowing the ENI to 1280 bytes", func() error { return setMTU("eni1", 1280) })
		if err := f.vpc.Do(func(ns.NetNS) error { return setMTU("vpc1", 1280) }); err != nil {
			t.Fatal(err)
		}
		before, received := counterNow(t, d.Reader, VerdictFromPodTooBig), snmp6(t, f.pod1, "Icmp6InPktTooBigs")
		if err := udpExchangeSized(f.pod1, fabricPod1v6, netip.AddrPortFrom(fabricVPCHost, 7000), 1400, 0, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodTooBig, before+1)
		if got := snmp6(t, f.pod1, "Icmp6InPktTooBigs"); got <= received {
			t.Errorf("the pod received no Packet Too Big (Icmp6InPktTooBigs %d -> %d)", received, got)
		}
		if err := f.pod1.Do(func(ns.NetNS) error {
			routes, err := netlink.RouteGet(fabricVPCHost.AsSlice())
			if err != nil {
				return err
			}
			if len(routes) != 1 || routes[0].MTU != 1280 {
				return fmt.Errorf("the pod's route to the VPC host is %+v; want the learnt MTU 1280", routes)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func setMTU(name string, mtu int) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetMTU(l, mtu)
}

// snmp6 reads a counter of netns n's /proc/net/snmp6 (the thread's: /proc/net is the process's netns).
func snmp6(t *testing.T, n ns.NetNS, name string) uint64 {
	t.Helper()
	var v uint64
	if err := n.Do(func(ns.NetNS) error {
		b, err := os.ReadFile("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				v, err = strconv.ParseUint(f[1], 10, 64)
				return err
			}
		}
		return fmt.Errorf("no %s in /proc/net/snmp6", name)
	}); err != nil {
		t.Fatal(err)
	}
	return v
}
