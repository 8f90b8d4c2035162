package datapath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/internal/linktest"
)

// Forged sources, with real programs in network namespaces: a pod (or the VPC) sends raw frames, as any pod
// with CAP_NET_RAW (the default under containerd) can.

// TestAPodCannotSendAsAnotherBehindVLANTags: two VLAN-0 tags around a packet from pod2's address, sent by
// pod1 to the VPC host. The kernel takes the outer tag off before tc and the inner one after; were the
// frame passed as "not IPv4", the IP stack would route it out and to_vpc would even move it to pod2's ENI.
func TestAPodCannotSendAsAnotherBehindVLANTags(t *testing.T) {
	f := newFabric(t)
	d := f.start(t, AttachTCX)
	// With the node's reverse-path filter on, an addressless host veth accepts no source but its pod's:
	// eniwire's checks must hold without it, as on nodes that turn it off.
	f.nodeDo(t, "routing the VPC host, reverse-path filter off", func() error {
		if err := sysctls(map[string]string{"net/ipv4/conf/all/rp_filter": "0", "net/ipv4/conf/host1/rp_filter": "0"}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{Dst: hostNet(vpcHost), Gw: gw1.AsSlice(), LinkIndex: f.eni1})
	})
	at := netip.AddrPortFrom(vpcHost, 7100)
	got := recordUDP(t, f.vpc, at)
	// send puts a raw frame on the pod's eth0, addressed to its host veth.
	send := func(pod ns.NetNS, hostVeth string, pkt []byte) {
		t.Helper()
		copy(pkt[0:6], linkMAC(t, f.node, hostVeth))
		copy(pkt[6:12], linkMAC(t, pod, "eth0"))
		if err := pod.Do(func(ns.NetNS) error { return linktest.SendFrame("eth0", pkt) }); err != nil {
			t.Fatal(err)
		}
	}

	// The way is open: each pod's own untagged datagram reaches the VPC host (and the node has resolved
	// both gateways).
	for _, p := range []struct {
		n    ns.NetNS
		veth string
		ip   netip.Addr
	}{{f.pod1, "host1", pod1IP}, {f.pod2, "host2", pod2IP}} {
		send(p.n, p.veth, frame(p.ip, vpcHost, protoUDP, 7101, at.Port()))
		if from := got.next(3 * time.Second); from != p.ip {
			t.Fatalf("%s's own untagged datagram: the VPC host got one from %v", p.ip, from)
		}
	}

	before := counterNow(t, d.Reader, VerdictFromPodVLAN)
	for range 3 {
		send(f.pod1, "host1", vlanTagged(frame(pod2IP, vpcHost, protoUDP, 7102, at.Port()), etherTypeVLAN, etherTypeVLAN))
		if from := got.next(500 * time.Millisecond); from.IsValid() {
			t.Fatalf("a double-tagged datagram sent by pod1 as %s reached the VPC host from %s", pod2IP, from)
		}
	}
	waitCounter(t, d.Reader, VerdictFromPodVLAN, before+3)
}

// TestTheVPCCannotSendAsTheNodeOrItsPods: a packet arriving from the VPC from a pod of this node or from
// the node's own address is forged (the node delivers its pods' packets to each other itself); it reaches
// no pod, while one from a VPC host does.
func TestTheVPCCannotSendAsTheNodeOrItsPods(t *testing.T) {
	f := newFabric(t)
	d := f.start(t, AttachTCX)
	at := netip.AddrPortFrom(pod1IP, 7200)
	got := recordUDP(t, f.pod1, at)
	send := func(src netip.Addr) {
		t.Helper()
		pkt := frame(src, pod1IP, protoUDP, 7201, at.Port())
		copy(pkt[0:6], f.eni1MAC)
		copy(pkt[6:12], linkMAC(t, f.vpc, "vpc1"))
		if err := f.vpc.Do(func(ns.NetNS) error { return linktest.SendFrame("vpc1", pkt) }); err != nil {
			t.Fatal(err)
		}
	}

	send(vpcHost)
	if from := got.next(3 * time.Second); from != vpcHost {
		t.Fatalf("a datagram from the VPC host: pod1 got one from %v", from)
	}
	spoofs := counterNow(t, d.Reader, VerdictToPodSpoof)
	toHost := counterNow(t, d.Reader, VerdictToPodHostSource)
	for _, src := range []netip.Addr{pod2IP, addr("10.77.1.10")} {
		send(src)
		if from := got.next(500 * time.Millisecond); from.IsValid() {
			t.Errorf("a datagram from the VPC claiming %s reached pod1 from %s", src, from)
		}
	}
	waitCounter(t, d.Reader, VerdictToPodSpoof, spoofs+1)
	waitCounter(t, d.Reader, VerdictToPodHostSource, toHost+1)
}

// linkMAC reads the MAC of link name in netns n.
func linkMAC(t *testing.T, n ns.NetNS, name string) (mac net.HardwareAddr) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(name)
		if err == nil {
			mac = l.Attrs().HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// udpRecorder is a UDP socket that reports the source of every datagram it receives.
type udpRecorder chan netip.Addr

// recordUDP listens on at in netns n until the test ends.
func recordUDP(t *testing.T, n ns.NetNS, at netip.AddrPort) udpRecorder {
	t.Helper()
	conn := listenUDP(t, n, at)
	r := make(udpRecorder, 16)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			r <- from.(*net.UDPAddr).AddrPort().Addr().Unmap()
		}
	}()
	return r
}

// next returns the source of the next datagram, or the zero Addr when none comes within d.
func (r udpRecorder) next(d time.Duration) netip.Addr {
	select {
	case a := <-r:
		return a
	case <-time.After(d):
		return netip.Addr{}
	}
}

// TestAPodCannotBecomeTheNodesIPv6Router: a pod sends a Router Advertisement on its link, as it could to
// become the node's IPv6 default router (the CVE-2020-10749 class). The host veth here takes
// advertisements (accept_ra=1, the kernel's default; the plugin turns it off on the veths it makes), so
// only from_pod stands between the pod and the node's routes.
func TestAPodCannotBecomeTheNodesIPv6Router(t *testing.T) {
	f := newFabric(t)
	f.start(t, AttachTCX)
	ra := routerAdvertisement(linkMAC(t, f.pod1, "eth0"))
	if err := f.pod1.Do(func(ns.NetNS) error { return linktest.SendFrame("eth0", ra) }); err != nil {
		t.Fatal(err)
	}
	// The kernel takes an advertisement in as it arrives; give it a moment all the same. (The pod's own
	// IPv6 chatter also counts as dropped_ipv6, so the counter proves nothing here; the routes do.)
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		var routes []netlink.Route
		f.nodeDo(t, "listing the node's IPv6 default routes", func() (err error) {
			routes, err = netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Dst: nil}, 0)
			return err
		})
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				t.Fatalf("the node took an IPv6 default route from a pod: %+v", r)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
