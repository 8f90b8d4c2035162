package e2e

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/test/simnode"
)

// TestAnIPv6NodeServesIPv6PodsEndToEnd: the agent in IPv6 mode (ENABLE_IPv6) with the BPF datapath, pods
// wired by the real plugin through libcni: each pod gets an address of the /80 the node took with one
// AssignIpv6Addresses and an IPv4 egress address of 169.254.172.0/22; a pod reaches another pod and the
// VPC host over IPv6 from its own address, and the VPC host's IPv4 address from the node's primary IPv4 (its
// egress address translated); CHECK passes; after a kill -9 restart of the agent the pods keep both
// addresses and a new pod gets other ones; IPv4 a pod sends from another pod's egress address is dropped by
// from_pod.
func TestAnIPv6NodeServesIPv6PodsEndToEnd(t *testing.T) {
	w := newWorldWith(t, simnode.Options{IPv6: true})
	vpcHost := w.fab.VPCHost()
	vpc6, vpc4 := netip.AddrPortFrom(vpcHost.IPv6, echoPort), netip.AddrPortFrom(vpcHost.IP, echoPort)
	echo(t, vpcHost.NetnsPath, vpc6)
	echo(t, vpcHost.NetnsPath, vpc4)
	w.startAgent()
	t.Cleanup(func() {
		if err := w.stopAgent(syscall.SIGTERM); err != nil {
			t.Errorf("stopping the agent: %v", err)
		}
	})
	ctx := ctxFor(t, 2*time.Minute)

	a, b := w.addPod("v6a"), w.addPod("v6b")
	e, ok := w.sim.ENI(w.inst.PrimaryENI)
	if !ok || len(e.IPv6Prefixes) != 1 {
		t.Fatalf("the primary ENI holds the /80s %v, want one", e.IPv6Prefixes)
	}
	prefix := netip.MustParsePrefix(e.IPv6Prefixes[0])
	for _, p := range []*pod{a, b} {
		if !prefix.Contains(p.ip) || !dptypes.IPv4EgressRange.Contains(p.EgressIP) {
			t.Fatalf("%s got %s and egress %s, want an address of %s and one of %s", p.name, p.ip, p.EgressIP, prefix, dptypes.IPv4EgressRange)
		}
	}
	if a.EgressIP == b.EgressIP {
		t.Fatalf("both pods got egress address %s", a.EgressIP)
	}
	if n := w.sim.Counters()["AssignIpv6Addresses"].Calls; n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls, want 1", n)
	}
	bEcho := netip.AddrPortFrom(b.ip, echoPort)
	echo(t, b.ns.Path(), bEcho)

	for _, c := range []struct {
		name string
		dst  netip.AddrPort
		seen netip.Addr
	}{
		{"a pod reaches another pod over IPv6 from its own address", bEcho, a.ip},
		{"a pod reaches the VPC host over IPv6 from its own address", vpc6, a.ip},
		{"a pod reaches the VPC host's IPv4 address from the node's primary IPv4", vpc4, netip.MustParseAddr(w.inst.PrimaryIP)},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen, err := talk(ctx, a, c.dst, 3)
			if err != nil {
				t.Fatal(err)
			}
			if seen != c.seen {
				t.Fatalf("%s saw the connection from %s, want %s", c.dst, seen, c.seen)
			}
		})
	}

	t.Run("CNI CHECK passes for both pods", func(t *testing.T) {
		for _, p := range []*pod{a, b} {
			must(t, w.n.CheckPod(ctx, p.Pod))
		}
	})

	t.Run("after a kill -9 restart of the agent the pods keep both addresses and a new pod gets neither", func(t *testing.T) {
		books := w.killAndRestartAgent(t, ctx)
		for _, p := range []*pod{a, b} {
			if asg, ok := books[p.ip]; !ok || asg.EgressIP != p.EgressIP.String() {
				t.Errorf("after the restart the agent's books lack %s with egress address %s: %+v", p.ip, p.EgressIP, books)
			}
		}
		late := w.addPod("v6late")
		if late.ip == a.ip || late.ip == b.ip || late.EgressIP == a.EgressIP || late.EgressIP == b.EgressIP {
			t.Errorf("the pod added after the restart got %s and %s, held already", late.ip, late.EgressIP)
		}
		for _, p := range []*pod{a, late} {
			if seen, err := talk(ctx, p, vpc4, 3); err != nil || seen != netip.MustParseAddr(w.inst.PrimaryIP) {
				t.Errorf("%s to the VPC host over IPv4 after the restart: seen from %s, %v", p.name, seen, err)
			}
		}
	})

	// Last: sendSpoofed adds the forged address to eth0 and removes it, and with it the kernel flushes the
	// IPv4 routes of an eth0 that holds no other IPv4 address (CHECK would see them gone).
	t.Run("IPv4 from another pod's egress address is dropped as spoofed", func(t *testing.T) {
		before := w.spoofDrops(t)
		const n = 10
		must(t, sendSpoofed(a, b.EgressIP, netip.AddrPortFrom(vpcHost.IP, 9), n))
		w.waitSpoofDrops(t, before, n)
	})
}
