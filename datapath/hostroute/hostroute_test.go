package hostroute

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/testenv"
)

// newNamespace returns a netlink handle inside a fresh, unnamed network namespace, closed at the end.
func newNamespace(t *testing.T) *netlink.Handle {
	testenv.RequireRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	origin, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer origin.Close()
	ns, err := netns.New()
	if err != nil {
		testenv.Unavailable(t, "cannot create a network namespace: "+err.Error())
	}
	if err := netns.Set(origin); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); ns.Close() })
	return h
}

func TestPodRoutesComeAndGo(t *testing.T) {
	h := newNamespace(t)
	name := fmt.Sprintf("hr%d", os.Getpid()%100000)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	link, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	r := &Routes{Handle: h}
	pod := dptypes.Pod{IP: netip.MustParseAddr("10.9.0.7"), HostVeth: name}
	routes := func() []netlink.Route {
		rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: &net.IPNet{IP: net.ParseIP("10.9.0.7").To4(), Mask: net.CIDRMask(32, 32)}}, netlink.RT_FILTER_DST)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	for _, step := range []struct {
		name string
		do   func() error
		want int
	}{
		{"PodUp adds the /32 route on the host veth", func() error { return r.PodUp(context.Background(), pod) }, 1},
		{"a repeated PodUp keeps one route", func() error { return r.PodUp(context.Background(), pod) }, 1},
		{"PodDown removes it", func() error { return r.PodDown(context.Background(), pod) }, 0},
		{"a repeated PodDown succeeds", func() error { return r.PodDown(context.Background(), pod) }, 0},
	} {
		t.Run(step.name, func(t *testing.T) {
			if err := step.do(); err != nil {
				t.Fatal(err)
			}
			rs := routes()
			if len(rs) != step.want {
				t.Logf("routes: %+v", rs)
				t.Fatalf("%d routes, want %d", len(rs), step.want)
			}
			if step.want == 1 && rs[0].LinkIndex != link.Attrs().Index {
				t.Fatalf("route on ifindex %d, want %d", rs[0].LinkIndex, link.Attrs().Index)
			}
		})
	}
	if err := r.PodUp(context.Background(), dptypes.Pod{IP: netip.MustParseAddr("10.9.0.8"), HostVeth: "missing0"}); err == nil {
		t.Fatal("PodUp on a missing veth succeeded")
	}
}

// A pod without an address cannot be torn down: PodDown says so instead of answering success while the
// route stays. (The zero Addr is the only invalid address a caller can hand it: the controller parses.)
func TestPodDownOfAPodWithoutAnAddressFails(t *testing.T) {
	r := &Routes{Handle: newNamespace(t)}
	if err := r.PodDown(context.Background(), dptypes.Pod{HostVeth: "gone0"}); err == nil {
		t.Fatal("PodDown of a pod without a valid address answered success")
	}
}

// An IPv6 pod (IPv6 mode) is routed by its /128 and by its IPv4 egress address's /32, both on its host veth,
// and PodDown takes both away.
func TestIPv6PodRoutesComeAndGoWithTheirEgressAddress(t *testing.T) {
	h := newNamespace(t)
	name := fmt.Sprintf("hs%d", os.Getpid()%100000)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}
	link, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	r := &Routes{Handle: h}
	pod := dptypes.Pod{IP: netip.MustParseAddr("2600:1f14:e0:1:a::5"), EgressIP: netip.MustParseAddr("169.254.172.5"), HostVeth: name}
	routesTo := func(ip netip.Addr) []netlink.Route {
		family := netlink.FAMILY_V4
		if ip.Is6() {
			family = netlink.FAMILY_V6
		}
		rs, err := h.RouteListFiltered(family, &netlink.Route{Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}}, netlink.RT_FILTER_DST)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	for _, step := range []struct {
		name string
		do   func() error
		want int
	}{
		{"PodUp adds the /128 and the egress /32 on the host veth", func() error { return r.PodUp(context.Background(), pod) }, 1},
		{"a repeated PodUp keeps one of each", func() error { return r.PodUp(context.Background(), pod) }, 1},
		{"PodDown removes both", func() error { return r.PodDown(context.Background(), pod) }, 0},
	} {
		t.Run(step.name, func(t *testing.T) {
			if err := step.do(); err != nil {
				t.Fatal(err)
			}
			for _, ip := range []netip.Addr{pod.IP, pod.EgressIP} {
				rs := routesTo(ip)
				if len(rs) != step.want {
					t.Fatalf("%d routes to %s, want %d: %+v", len(rs), ip, step.want, rs)
				}
				if step.want == 1 && rs[0].LinkIndex != link.Attrs().Index {
					t.Fatalf("route to %s on ifindex %d, want %d", ip, rs[0].LinkIndex, link.Attrs().Index)
				}
			}
		})
	}
}
