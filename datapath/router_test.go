package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// TestTracerouteFromAPodShowsTheNode: the fast path behaves as a router hop. A packet from a pod that
// would expire at the node goes to the host stack, which answers ICMP time exceeded from a node address;
// the pod gets that answer.
func TestTracerouteFromAPodShowsTheNode(t *testing.T) {
	t.Parallel()
	f := newFabric(t)
	d := f.start(t, AttachAuto)
	// A node routes the VPC (its default route); the fabric's node does not until told.
	f.nodeDo(t, "routing the VPC host", func() error {
		return netlink.RouteAdd(&netlink.Route{Dst: hostNet(vpcHost), Gw: gw1.AsSlice(), LinkIndex: f.eni1})
	})
	before := counterNow(t, d.Reader, VerdictFromPodTTL)
	from, err := timeExceededFrom(f.pod1, netip.AddrPortFrom(vpcHost, 33434), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if nodeIPs := f.config("", AttachAuto).NodeIPs; !slices.Contains(nodeIPs, from) {
		t.Errorf("time exceeded came from %s, want one of the node's addresses %v", from, nodeIPs)
	}
	waitCounter(t, d.Reader, VerdictFromPodTTL, before+1)
}

// timeExceededFrom sends UDP datagrams with TTL 1 from netns n to dst and returns the source of the first
// ICMP time exceeded that comes back.
func timeExceededFrom(n ns.NetNS, dst netip.AddrPort, within time.Duration) (netip.Addr, error) {
	var (
		icmp net.PacketConn
		udp  *net.UDPConn
	)
	if err := n.Do(func(ns.NetNS) (err error) {
		if icmp, err = net.ListenPacket("ip4:icmp", "0.0.0.0"); err != nil {
			return err
		}
		udp, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("opening sockets: %w", err)
	}
	defer icmp.Close()
	defer udp.Close()
	raw, err := udp.SyscallConn()
	if err != nil {
		return netip.Addr{}, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, 1) }); err != nil || serr != nil {
		return netip.Addr{}, fmt.Errorf("setting TTL 1: %v %v", err, serr)
	}
	deadline := time.Now().Add(within)
	buf := make([]byte, 1500)
	for time.Now().Before(deadline) {
		_, _ = udp.Write([]byte("eniwire traceroute"))
		_ = icmp.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		nr, from, err := icmp.ReadFrom(buf)
		if err != nil || nr < 1 || buf[0] != icmpTimeExceeded {
			continue
		}
		a, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP.To4())
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("no ICMP time exceeded for %s within %s", dst, within)
}
