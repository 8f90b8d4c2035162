package datapath

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/testenv"
)

func TestPacketsFlowThroughNamespacesWithTCX(t *testing.T) {
	t.Parallel()
	testPacketsFlow(t, AttachTCX)
}

func TestPacketsFlowThroughNamespacesWithClsactFallback(t *testing.T) {
	t.Parallel()
	testPacketsFlow(t, AttachClsact)
}

func testPacketsFlow(t *testing.T, mode AttachMode) {
	nft := testenv.RequireTool(t, "nft")
	root := testPinRoot(t)
	f := newFabric(t)
	cfg := f.config(root, mode)
	d := f.open(t, cfg)
	t.Cleanup(func() {
		_ = d.Close()
		_ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) })
	})
	f.wire(t, d)
	if got := d.Mode(); got != mode {
		t.Fatalf("attach mode = %s, want %s", got, mode)
	}
	serveUDPEcho(t, f.vpc, netip.AddrPortFrom(vpcHost, 7000))
	serveUDPEcho(t, f.pod2, netip.AddrPortFrom(pod2IP, 7001))
	f.addServiceDNAT(t, nft)

	t.Run("a pod reaches a pod on the same node through redirect_peer", func(t *testing.T) {
		before := counterNow(t, d.Reader, VerdictFromPodToPeer)
		if err := udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(pod2IP, 7001), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodToPeer, before+2) // request and echo
	})
	t.Run("each pod reaches the VPC out of its own ENI and gets the answer through to_pod", func(t *testing.T) {
		outBefore := counterNow(t, d.Reader, VerdictFromPodOutENI)
		inBefore := counterNow(t, d.Reader, VerdictToPodToPeer)
		for _, p := range []ns.NetNS{f.pod1, f.pod2} {
			if err := udpExchange(p, netip.Addr{}, netip.AddrPortFrom(vpcHost, 7000), 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		waitCounter(t, d.Reader, VerdictFromPodOutENI, outBefore+2)
		waitCounter(t, d.Reader, VerdictToPodToPeer, inBefore+2)
	})
	t.Run("a Service reply comes back through the host to be un-NATed, the request left by the pod's ENI", func(t *testing.T) {
		reroutedBefore := counterNow(t, d.Reader, VerdictToVPCRerouted)
		natBefore := counterNow(t, d.Reader, VerdictToPodHostFlow)
		// pod2 is on eni2; the host routes the DNAT'ed packet out of eni1, where the VPC's
		// source/destination check would drop it. to_vpc moves it to eni2. The connected socket only
		// accepts the echo from the Service IP, so un-NAT must have happened.
		if err := udpExchange(f.pod2, netip.Addr{}, netip.AddrPortFrom(svcIP, 53), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictToVPCRerouted, reroutedBefore+1)
		waitCounter(t, d.Reader, VerdictToPodHostFlow, natBefore+1)
	})
	t.Run("a spoofed source is dropped", func(t *testing.T) {
		if err := f.pod1.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: hostNet(spoofIP)})
		}); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictFromPodSpoof)
		if err := udpExchange(f.pod1, spoofIP, netip.AddrPortFrom(vpcHost, 7000), 700*time.Millisecond); err == nil {
			t.Fatalf("a packet from a spoofed source got an answer")
		}
		waitCounter(t, d.Reader, VerdictFromPodSpoof, before+1)
	})
	t.Run("a pod sending with another pod's address is dropped", func(t *testing.T) {
		// pod1 takes pod2's address as its own; without the per-veth check its packet would leave by
		// pod2's ENI and pass the VPC's source/destination check.
		if err := f.pod1.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: hostNet(pod2IP)})
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.pod1.Do(func(ns.NetNS) error {
				l, err := netlink.LinkByName("eth0")
				if err != nil {
					return err
				}
				return netlink.AddrDel(l, &netlink.Addr{IPNet: hostNet(pod2IP)})
			})
		})
		before := counterNow(t, d.Reader, VerdictFromPodSpoof)
		outBefore := counterNow(t, d.Reader, VerdictFromPodOutENI)
		if err := udpExchange(f.pod1, pod2IP, netip.AddrPortFrom(vpcHost, 7000), 700*time.Millisecond); err == nil {
			t.Fatalf("a packet sent as another pod got an answer")
		}
		waitCounter(t, d.Reader, VerdictFromPodSpoof, before+1)
		if after := counterNow(t, d.Reader, VerdictFromPodOutENI); after != outBefore {
			t.Errorf("from_pod/out_eni moved from %d to %d: a packet sent as another pod left by an ENI", outBefore, after)
		}
	})
	t.Run("per-pod traffic moved", func(t *testing.T) {
		traffic, err := d.PodTraffic()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range traffic {
			if p.TxPackets == 0 || p.RxPackets == 0 {
				t.Errorf("pod %s traffic = %+v, want packets both ways", p.IP, p)
			}
		}
		if len(traffic) != 2 {
			t.Errorf("traffic for %d pods, want 2", len(traffic))
		}
	})

	t.Run("a restarted datapath keeps entries and attachments", func(t *testing.T) {
		if err := d.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// Between agents, packets still flow: the pins hold programs, maps and attachments.
		if err := udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(vpcHost, 7000), 5*time.Second); err != nil {
			t.Fatalf("while no agent runs: %v", err)
		}
		before := counterNow(t, mustReader(t, root), VerdictFromPodOutENI)
		// A pod whose veth vanished while no agent ran: its link pin must not outlive it.
		goneIfindex := 0
		if mode == AttachTCX {
			f.nodeDo(t, "attaching to a veth that then vanishes", func() error {
				if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "gone1"}, PeerName: "gone2"}); err != nil {
					return err
				}
				l, err := netlink.LinkByName("gone1")
				if err != nil {
					return err
				}
				goneIfindex = l.Attrs().Index
				tmp := f.open(t, cfg)
				if err := tmp.AttachPodVeth(goneIfindex); err != nil {
					return err
				}
				if err := tmp.Close(); err != nil {
					return err
				}
				return netlink.LinkDel(l)
			})
		}
		d = f.open(t, cfg)
		if goneIfindex != 0 {
			if _, err := os.Stat(filepath.Join(root, linksDir, hookFromPod.pinName(goneIfindex))); !os.IsNotExist(err) {
				t.Errorf("the link pin of a vanished veth survived a restart (stat: %v)", err)
			}
		}
		if got := d.Mode(); got != mode {
			t.Errorf("mode after restart = %s, want %s", got, mode)
		}
		pods, err := d.Pods()
		if err != nil || len(pods) != 2 {
			t.Fatalf("pods after restart = %v, %v; want 2", pods, err)
		}
		if n := pinnedLinks(root); mode == AttachTCX && n != 6 {
			t.Errorf("%d links pinned, want 6 (from_pod on 2 veths, to_pod and to_vpc on 2 ENIs)", n)
		}
		if err := udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(vpcHost, 7000), 5*time.Second); err != nil {
			t.Fatalf("after restart: %v", err)
		}
		waitCounter(t, d.Reader, VerdictFromPodOutENI, before+1)
	})

	t.Run("attachments use only the chosen mechanism", func(t *testing.T) {
		f.nodeDo(t, "inspecting attachments", func() error {
			for _, c := range []struct {
				ifindex int
				h       hook
			}{{f.host1, hookFromPod}, {f.eni1, hookToPod}, {f.eni1, hookToVPC}} {
				tcx := tcxCount(t, c.ifindex, c.h)
				cls := hasFilter(c.ifindex, c.h)
				if mode == AttachTCX && (tcx != 1 || cls) {
					t.Errorf("%s on %d: %d tcx programs, cls_bpf filter %v; want tcx only", c.h.name, c.ifindex, tcx, cls)
				}
				if mode == AttachClsact && (tcx != 0 || !cls) {
					t.Errorf("%s on %d: %d tcx programs, cls_bpf filter %v; want cls_bpf only", c.h.name, c.ifindex, tcx, cls)
				}
			}
			return nil
		})
	})

	t.Run("a released pod and a detached ENI leave nothing behind", func(t *testing.T) {
		f.nodeDo(t, "releasing", func() error {
			if err := d.DeletePod(pod2IP); err != nil {
				return err
			}
			if err := d.DetachPodVeth(f.host2); err != nil {
				return err
			}
			if err := d.DeleteENI(f.eni2); err != nil {
				return err
			}
			// Twice: a retried release must succeed.
			if err := d.DetachPodVeth(f.host2); err != nil {
				return err
			}
			if err := d.DeleteENI(f.eni2); err != nil {
				return err
			}
			if n := tcxCount(t, f.host2, hookFromPod) + tcxCount(t, f.eni2, hookToPod) + tcxCount(t, f.eni2, hookToVPC); n != 0 {
				t.Errorf("%d tcx programs left on released interfaces", n)
			}
			if hasFilter(f.host2, hookFromPod) || hasFilter(f.eni2, hookToPod) || hasFilter(f.eni2, hookToVPC) {
				t.Errorf("cls_bpf filters left on released interfaces")
			}
			return nil
		})
		pods, _ := d.Pods()
		enis, _ := d.ENIs()
		if len(pods) != 1 || len(enis) != 1 {
			t.Errorf("after release: %d pods, %d ENIs; want 1 and 1", len(pods), len(enis))
		}
	})

	t.Run("uninstall detaches and unpins everything of ours", func(t *testing.T) {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		f.nodeDo(t, "uninstalling", func() error { return Uninstall(root) })
		f.nodeDo(t, "inspecting", func() error {
			for _, c := range []struct {
				ifindex int
				h       hook
			}{{f.host1, hookFromPod}, {f.eni1, hookToPod}, {f.eni1, hookToVPC}} {
				if tcxCount(t, c.ifindex, c.h) != 0 || hasFilter(c.ifindex, c.h) {
					t.Errorf("%s still attached to %d", c.h.name, c.ifindex)
				}
			}
			if qs, err := netlink.QdiscList(mustLink(t, f.eni1)); err == nil {
				for _, q := range qs {
					if q.Type() == "clsact" {
						t.Errorf("empty clsact qdisc left on eni1")
					}
				}
			}
			return nil
		})
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			entries, _ := os.ReadDir(filepath.Join(root, mapsDir))
			t.Errorf("pin root still exists (%v), maps: %v", err, entries)
		}
	})
}

func tcxCount(t *testing.T, ifindex int, h hook) int {
	t.Helper()
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: h.tcxType()})
	if err != nil {
		t.Fatalf("querying tcx programs of %d: %v", ifindex, err)
	}
	n := 0
	for _, p := range res.Programs {
		prog, err := ebpf.NewProgramFromID(p.ID)
		if err != nil {
			continue
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil && info.Name == h.progName() {
			n++
		}
	}
	return n
}

func mustLink(t *testing.T, ifindex int) netlink.Link {
	t.Helper()
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustReader(t *testing.T, root string) *Reader {
	t.Helper()
	r, err := OpenPinnedReadOnly(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
