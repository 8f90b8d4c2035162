package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// TestAVPCOnlyPodsPacketsTakeTheVPCsWay: a pod of a security-group set in strict mode (Pod.VPCOnly) and
// another pod of the node exchange packets through the VPC in both directions, out of each sender's ENI
// and in through to_pod, never by redirect_peer: the VPC's groups see them. Its packets to a destination
// outside the VPC leave by its ENI too, where the other pod's go to the host to be SNATed. A restart of
// the datapath keeps the path. The host's own packets to it (kubelet's probes) reach it as before.
func TestAVPCOnlyPodsPacketsTakeTheVPCsWay(t *testing.T) {
	f := newFabric(t)
	d := f.start(t, AttachTCX)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// The VPC routes between its subnets (here between the node's two ENIs) and reaches the world.
	must("letting the vpc forward", f.vpc.Do(func(ns.NetNS) error {
		return sysctls(map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/send_redirects": "0"})
	}))
	f.nodeDo(t, "marking pod1 VPC-only", func() error {
		return d.PutPodEntry(Pod{IP: pod1IP, HostIfindex: f.host1, ENIIfindex: f.eni1, VPCOnly: true})
	})
	serveUDPEcho(t, f.pod2, netip.AddrPortFrom(pod2IP, 7001))
	serveUDPEcho(t, f.pod1, netip.AddrPortFrom(pod1IP, 7002))

	exchange := func(from ns.NetNS, to netip.AddrPort) {
		t.Helper()
		peerBefore := counterNow(t, d.Reader, VerdictFromPodToPeer)
		outBefore := counterNow(t, d.Reader, VerdictFromPodOutENI)
		inBefore := counterNow(t, d.Reader, VerdictToPodToPeer)
		if err := udpExchange(from, netip.Addr{}, to, 2*time.Second); err != nil {
			cs, _ := d.Reader.Counters()
			for _, c := range cs {
				if c.Packets > 0 {
					t.Logf("%v: %d", c.Verdict, c.Packets)
				}
			}
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodOutENI, outBefore+2) // request and echo, each out of its sender's ENI
		waitCounter(t, d.Reader, VerdictToPodToPeer, inBefore+2)
		if after := counterNow(t, d.Reader, VerdictFromPodToPeer); after != peerBefore {
			t.Errorf("from_pod/to_peer moved from %d to %d: a VPC-only pod's packet took the same-node shortcut", peerBefore, after)
		}
	}
	t.Run("the VPC-only pod reaches a pod of the node through the VPC", func(t *testing.T) {
		exchange(f.pod1, netip.AddrPortFrom(pod2IP, 7001))
	})
	t.Run("a pod of the node reaches the VPC-only pod through the VPC", func(t *testing.T) {
		exchange(f.pod2, netip.AddrPortFrom(pod1IP, 7002))
	})
	t.Run("outside the VPC it leaves by its ENI, unSNATed, while the other pod's packet goes to the host", func(t *testing.T) {
		world := addr("198.51.100.7")
		must("giving the vpc the world", f.vpc.Do(func(ns.NetNS) error {
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			return netlink.AddrAdd(lo, &netlink.Addr{IPNet: hostNet(world)})
		}))
		serveUDPEcho(t, f.vpc, netip.AddrPortFrom(world, 7003))
		outBefore := counterNow(t, d.Reader, VerdictFromPodOutENI)
		if err := udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(world, 7003), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodOutENI, outBefore+1)
		hostBefore := counterNow(t, d.Reader, VerdictFromPodToHost)
		_ = udpExchange(f.pod2, netip.Addr{}, netip.AddrPortFrom(world, 7003), 300*time.Millisecond) // the node has no route there
		waitCounter(t, d.Reader, VerdictFromPodToHost, hostBefore+1)
	})
	t.Run("the node's own packets reach it and its answers come back", func(t *testing.T) {
		if err := udpExchange(f.node, netip.Addr{}, netip.AddrPortFrom(pod1IP, 7002), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the path is read back as written", func(t *testing.T) {
		pods, err := d.Reader.Pods()
		must("reading pods", err)
		for _, p := range pods {
			if want := p.IP == pod1IP; p.VPCOnly != want {
				t.Errorf("pod %s reads back VPCOnly %v, want %v", p.IP, p.VPCOnly, want)
			}
		}
	})
}
