package nodenet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/hostroute"
	"github.com/eniwire/eniwire/datapath/internal/linktest"
	"github.com/eniwire/eniwire/internal/testenv"
)

// primaryIPs is IMDS as the driver reads it: an ENI's primary IP by MAC.
type primaryIPs map[string]netip.Addr

func (p primaryIPs) PrimaryIP(_ context.Context, mac string) (netip.Addr, error) {
	return p[strings.ToLower(mac)], nil
}

// nodeNS returns a fresh network namespace and a bpffs pin root of the test's own, both removed at its end.
func nodeNS(t *testing.T) (ns.NetNS, string) {
	t.Helper()
	testenv.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatalf("removing memlock limit: %v", err)
	}
	if _, err := os.Stat("/sys/fs/bpf"); err != nil {
		testenv.Unavailable(t, "bpffs is not mounted at /sys/fs/bpf")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	base := fmt.Sprintf("/sys/fs/bpf/eniwire-nodenet-test-%d-%s", os.Getpid(), hex.EncodeToString(b))
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	n, err := testutils.NewNS()
	if err != nil {
		testenv.Unavailable(t, "cannot create a network namespace: "+err.Error())
	}
	t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	return n, filepath.Join(base, "v1")
}

// addVeth adds a veth name <-> name+"p" with the given MAC on name (nil: the kernel's) and returns name's link.
func addVeth(name string, mac net.HardwareAddr) (netlink.Link, error) {
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac, MTU: 1500}, PeerName: name + "p"}); err != nil {
		return nil, fmt.Errorf("adding veth %s: %w", name, err)
	}
	return netlink.LinkByName(name)
}

func readSysctl(key string) string {
	b, _ := os.ReadFile(filepath.Join("/proc/sys", key))
	return strings.TrimSpace(string(b))
}

// TestBPFDriverWiresENIsAndPods runs the agent's production datapath in a node namespace: Open prepares the
// node and loads the programs, ENIUp configures a secondary ENI's link, PodUp routes a pod and writes its entry,
// and the Down calls undo them.
func TestBPFDriverWiresENIsAndPods(t *testing.T) {
	node, pinRoot := nodeNS(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	primaryMAC, _ := net.ParseMAC("02:00:00:00:10:01")
	eniMAC, _ := net.ParseMAC("02:00:00:00:10:02")
	eni := dptypes.ENI{ID: "eni-2", MAC: eniMAC, DeviceIndex: 1, Subnet: netip.MustParsePrefix("10.0.1.0/24"), Gateway: netip.MustParseAddr("10.0.1.1")}
	pod := dptypes.Pod{ContainerID: "c1", IfName: "eth0", IP: netip.MustParseAddr("10.0.1.20"), HostVeth: "eniwpod0", ENI: eni}

	// in runs f in the node's namespace: netlink, sysctls and the driver act on the namespace of the calling
	// thread, and every subtest runs on a goroutine of its own.
	in := func(t *testing.T, f func() error) {
		t.Helper()
		if err := node.Do(func(ns.NetNS) error { return f() }); err != nil {
			t.Fatal(err)
		}
	}
	var (
		b                *BPF
		eniLink, podLink netlink.Link
		ipForward        string
		ipv6             [2]string // the primary ENI's accept_ra, all's IPv6 forwarding
	)
	in(t, func() (err error) {
		if _, err := addVeth("eth0", primaryMAC); err != nil {
			return err
		}
		if eniLink, err = addVeth("ens6", eniMAC); err != nil {
			return err
		}
		if podLink, err = addVeth(pod.HostVeth, nil); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(podLink); err != nil {
			return err
		}
		b, err = Open(ctx, Config{
			PinRoot: pinRoot, PrimaryMAC: primaryMAC.String(), PrimaryIP: netip.MustParseAddr("10.0.0.10"),
			VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, MTU: 9001, MaxPods: 29,
			IMDS: primaryIPs{eniMAC.String(): netip.MustParseAddr("10.0.1.5")}, Logger: log, IPv6: true,
		})
		if err != nil {
			return fmt.Errorf("Open: %w", err)
		}
		ipv6 = [2]string{readSysctl("net/ipv6/conf/eth0/accept_ra"), readSysctl("net/ipv6/conf/all/forwarding")}
		// What the journal holds: the pod and its ENI, and a pod whose veth has gone (left to the controller).
		gone := dptypes.Pod{ContainerID: "c0", IfName: "eth0", IP: netip.MustParseAddr("10.0.1.19"), HostVeth: "eniwgone", ENI: eni}
		if err := b.Attach(ctx, []dptypes.ENI{eni}, []dptypes.Pod{pod, gone}); err != nil {
			return fmt.Errorf("Attach: %w", err)
		}
		ipForward = readSysctl("net/ipv4/ip_forward")
		return nil
	})
	t.Cleanup(func() {
		in(t, func() error {
			_ = b.Close()
			return Uninstall(ctx, pinRoot, log)
		})
	})
	if ipForward != "1" {
		t.Errorf("ip_forward = %q after Open, want 1", ipForward)
	}
	if ipv6 != [2]string{"2", "1"} {
		t.Errorf("eth0's accept_ra and IPv6 forwarding = %q after Open with IPv6, want 2 and 1", ipv6)
	}

	t.Run("Attach wrote the journal's pod and ENI entries, skipping the pod whose veth is gone", func(t *testing.T) {
		pods, err := b.dp.Pods()
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].IP != pod.IP || pods[0].HostIfindex != podLink.Attrs().Index || pods[0].ENIIfindex != eniLink.Attrs().Index {
			t.Errorf("pods map after Attach = %+v, want %s on %d via %d", pods, pod.IP, podLink.Attrs().Index, eniLink.Attrs().Index)
		}
		enis, err := b.dp.ENIs()
		if err != nil || len(enis) != 1 || enis[0].Ifindex != eniLink.Attrs().Index {
			t.Errorf("ENI map after Attach = %+v (%v), want ifindex %d", enis, err, eniLink.Attrs().Index)
		}
	})

	t.Run("the per-pod traffic map is sized by MaxPods", func(t *testing.T) {
		m, err := ebpf.LoadPinnedMap(filepath.Join(pinRoot, "maps", bpf.EniwireMapPodStats), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.MaxEntries() != 29 {
			t.Errorf("pod_stats holds %d entries at most, want MaxPods 29", m.MaxEntries())
		}
	})

	t.Run("ENIUp brings a secondary ENI up at the MTU with its primary IP as a /32", func(t *testing.T) {
		var (
			l        netlink.Link
			addrs    []netlink.Addr
			rpFilter string
		)
		in(t, func() (err error) {
			if err := b.ENIUp(ctx, eni); err != nil {
				return err
			}
			if l, err = netlink.LinkByIndex(eniLink.Attrs().Index); err != nil {
				return err
			}
			rpFilter = readSysctl("net/ipv4/conf/ens6/rp_filter")
			addrs, err = netlink.AddrList(l, netlink.FAMILY_V4)
			return err
		})
		if l.Attrs().MTU != 9001 || l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("ENI link MTU %d, up %v; want 9001, up", l.Attrs().MTU, l.Attrs().Flags&net.FlagUp != 0)
		}
		if len(addrs) != 1 || addrs[0].IPNet.String() != "10.0.1.5/32" {
			t.Errorf("ENI addresses %v, want 10.0.1.5/32 alone", addrs)
		}
		if rpFilter != "2" {
			t.Errorf("rp_filter on the ENI = %q, want 2", rpFilter)
		}
		entries, err := b.dp.ENIs()
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Ifindex != l.Attrs().Index || entries[0].Gateway != eni.Gateway {
			t.Errorf("ENI map %+v, want one entry for ifindex %d via %s", entries, l.Attrs().Index, eni.Gateway)
		}
	})

	t.Run("PodUp routes the pod's /32 to its veth and writes its entry; PodDown undoes both", func(t *testing.T) {
		dst := &net.IPNet{IP: pod.IP.AsSlice(), Mask: net.CIDRMask(32, 32)}
		routes := func() (rs []netlink.Route) {
			in(t, func() (err error) {
				rs, err = netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
				return err
			})
			return rs
		}
		in(t, func() error { return b.PodUp(ctx, pod) })
		if rs := routes(); len(rs) != 1 || rs[0].LinkIndex != podLink.Attrs().Index {
			t.Errorf("routes to the pod %+v, want one on its veth (ifindex %d)", rs, podLink.Attrs().Index)
		}
		pods, err := b.dp.Pods()
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].IP != pod.IP || pods[0].HostIfindex != podLink.Attrs().Index ||
			pods[0].ENIIfindex != eniLink.Attrs().Index {
			t.Errorf("pod map %+v, want %s on veth %d and ENI %d", pods, pod.IP, podLink.Attrs().Index, eniLink.Attrs().Index)
		}
		in(t, func() error { return b.PodDown(ctx, pod) })
		if rs := routes(); len(rs) != 0 {
			t.Errorf("routes to the pod after PodDown: %+v", rs)
		}
		if pods, err := b.dp.Pods(); err != nil || len(pods) != 0 {
			t.Errorf("pod map after PodDown: %+v, %v", pods, err)
		}
	})

	t.Run("PodDown of a pod without a valid address fails, leaving its entry and route", func(t *testing.T) {
		in(t, func() error { return b.PodUp(ctx, pod) })
		bad := pod
		bad.IP = netip.Addr{} // the only invalid address a caller can hand it: the controller parses
		var err error
		in(t, func() error { err = b.PodDown(ctx, bad); return nil })
		if err == nil {
			t.Error("PodDown of a pod without a valid address answered success")
		}
		if pods, perr := b.dp.Pods(); perr != nil || len(pods) != 1 {
			t.Errorf("pod map after the failed PodDown: %+v, %v; want the pod's entry", pods, perr)
		}
		in(t, func() error { return b.PodDown(ctx, pod) })
	})

	t.Run("after PodDown the pod's veth stays filtered until it goes: what the pod sends is dropped", func(t *testing.T) {
		before, err := b.dp.Counter(datapath.VerdictFromPodSpoof)
		if err != nil {
			t.Fatal(err)
		}
		// The pod, still running, sends from its own address out of its end of the veth.
		pkt := make([]byte, 14+20)
		copy(pkt[0:6], podLink.Attrs().HardwareAddr)
		binary.BigEndian.PutUint16(pkt[12:], 0x0800)
		pkt[14], pkt[14+8], pkt[14+9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(pkt[14+2:], 20)
		copy(pkt[14+12:], pod.IP.AsSlice())
		copy(pkt[14+16:], net.ParseIP("10.0.9.9").To4())
		in(t, func() error {
			if _, err := linktest.Up(pod.HostVeth+"p", ""); err != nil {
				return err
			}
			return linktest.SendFrame(pod.HostVeth+"p", pkt)
		})
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			after, err := b.dp.Counter(datapath.VerdictFromPodSpoof)
			if err != nil {
				t.Fatal(err)
			}
			if after.Packets == before.Packets+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("from_pod/dropped_spoof moved from %d to %d after the pod sent a packet, want +1: from_pod no longer filters its veth", before.Packets, after.Packets)
			}
		}
	})

	t.Run("ENIDown removes the ENI's entry", func(t *testing.T) {
		in(t, func() error { return b.ENIDown(ctx, eni) })
		if entries, err := b.dp.ENIs(); err != nil || len(entries) != 0 {
			t.Errorf("ENI map after ENIDown: %+v, %v", entries, err)
		}
	})

	t.Run("a pod whose setup fails keeps its veth from the sweep and gets no route", func(t *testing.T) {
		// The pod's ENI has no interface (detached, or not back yet): PodUp fails, and the controller tries
		// again later. Meanwhile the sweep of unclaimed veths must not delete the live pod's veth, and the
		// host must not route the pod's address to it: with no entry in the pods map, eniw_forward would
		// judge what the host delivers there as to no pod, past the pod's policy.
		missing := dptypes.ENI{ID: "eni-9", MAC: net.HardwareAddr{2, 0, 0, 0, 0x10, 9}, DeviceIndex: 2, Subnet: netip.MustParsePrefix("10.0.2.0/24"),
			Gateway: netip.MustParseAddr("10.0.2.1")}
		waiting := dptypes.Pod{ContainerID: "c2", IfName: "eth0", IP: netip.MustParseAddr("10.0.2.20"), HostVeth: "eniwpod2", ENI: missing}
		b.routes.Veths = hostroute.NewReaper(hostroute.ReaperConfig{Grace: time.Nanosecond})
		t.Cleanup(func() { b.routes.Veths = nil })
		var (
			upErr, lookErr error
			routed         []netlink.Route
		)
		in(t, func() error {
			// The pod's end is named off the sweep's prefix, as if it were in the pod's namespace.
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: waiting.HostVeth, MTU: 1500}, PeerName: "pod2"}); err != nil {
				return err
			}
			l, err := netlink.LinkByName(waiting.HostVeth)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			upErr = b.PodUp(ctx, waiting)
			for range 2 { // the first sweep finds it unclaimed, the second is past the grace
				if _, err := b.routes.Veths.Sweep(ctx); err != nil {
					return err
				}
			}
			_, lookErr = netlink.LinkByName(waiting.HostVeth)
			routed, err = netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: &net.IPNet{IP: waiting.IP.AsSlice(), Mask: net.CIDRMask(32, 32)}}, netlink.RT_FILTER_DST)
			return err
		})
		if upErr == nil {
			t.Fatal("PodUp succeeded although the pod's ENI has no interface")
		}
		if lookErr != nil {
			t.Fatalf("the sweep removed the veth of a pod whose PodUp failed (%v): %v", upErr, lookErr)
		}
		if len(routed) != 0 {
			t.Errorf("after a PodUp that failed before the pod's map entry (%v), the host routes its address: %+v", upErr, routed)
		}
	})
}
