package e2e

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/eniwire/eniwire/test/simnode"
)

// TestADualStackNodeServesPodsOverBothFamiliesEndToEnd: the agent in dual-stack mode (ENABLE_IPv6 with
// ENABLE_IPv4) with the BPF datapath, pods wired by the real plugin through libcni: each pod gets an IPv4 of
// the VPC and an IPv6 of the /80 the node took with one AssignIpv6Addresses, and no egress address; a pod
// reaches another pod and the VPC host over each family from its own address of that family; CHECK passes;
// after a kill -9 restart of the agent the pods keep both addresses and still talk over both; a source of
// either family that is another pod's is dropped by from_pod.
func TestADualStackNodeServesPodsOverBothFamiliesEndToEnd(t *testing.T) {
	w := newWorldWith(t, simnode.Options{IPv6: true, DualStack: true})
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

	a, b := w.addPod("dsa"), w.addPod("dsb")
	e, ok := w.sim.ENI(w.inst.PrimaryENI)
	if !ok || len(e.IPv6Prefixes) != 1 {
		t.Fatalf("the primary ENI holds the /80s %v, want one", e.IPv6Prefixes)
	}
	prefix := netip.MustParsePrefix(e.IPv6Prefixes[0])
	vpc := netip.MustParsePrefix("10.0.0.0/16")
	for _, p := range []*pod{a, b} {
		if !vpc.Contains(p.ip) || !prefix.Contains(p.IPv6) || p.EgressIP.IsValid() {
			t.Fatalf("%s got %s, %s and egress %s: want an IPv4 of %s, an IPv6 of %s and no egress address", p.name, p.ip, p.IPv6, p.EgressIP, vpc, prefix)
		}
	}
	if n := w.sim.Counters()["AssignIpv6Addresses"].Calls; n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls, want 1", n)
	}
	bEcho4, bEcho6 := netip.AddrPortFrom(b.ip, echoPort), netip.AddrPortFrom(b.IPv6, echoPort)
	echo(t, b.ns.Path(), bEcho4)
	echo(t, b.ns.Path(), bEcho6)

	paths := []struct {
		name string
		dst  netip.AddrPort
		seen netip.Addr
	}{
		{"a pod reaches another pod over IPv4 from its own IPv4", bEcho4, a.ip},
		{"a pod reaches another pod over IPv6 from its own IPv6", bEcho6, a.IPv6},
		{"a pod reaches the VPC host over IPv4 from its own IPv4", vpc4, a.ip},
		{"a pod reaches the VPC host over IPv6 from its own IPv6", vpc6, a.IPv6},
	}
	talkAll := func(t *testing.T) {
		for _, c := range paths {
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
	}
	talkAll(t)

	t.Run("CNI CHECK passes for both pods", func(t *testing.T) {
		for _, p := range []*pod{a, b} {
			must(t, w.n.CheckPod(ctx, p.Pod))
		}
	})

	t.Run("after a kill -9 restart of the agent the pods keep both addresses", func(t *testing.T) {
		books := w.killAndRestartAgent(t, ctx)
		for _, p := range []*pod{a, b} {
			if asg, ok := books[p.ip]; !ok || asg.IPv6 != p.IPv6.String() {
				t.Errorf("after the restart the agent's books lack %s with %s: %+v", p.ip, p.IPv6, books)
			}
		}
		late := w.addPod("dslate")
		if late.ip == a.ip || late.ip == b.ip || late.IPv6 == a.IPv6 || late.IPv6 == b.IPv6 {
			t.Errorf("the pod added after the restart got %s and %s, held already", late.ip, late.IPv6)
		}
		talkAll(t)
	})

	// Last: sendSpoofed adds the forged address to eth0 and removes it.
	for _, src := range []netip.Addr{b.ip, b.IPv6} {
		t.Run("a source that is another pod's "+src.String()+" is dropped as spoofed", func(t *testing.T) {
			dst := netip.AddrPortFrom(vpcHost.IP, 9)
			if src.Is6() {
				dst = netip.AddrPortFrom(vpcHost.IPv6, 9)
			}
			before := w.spoofDrops(t)
			const n = 10
			must(t, sendSpoofed(a, src, dst, n))
			w.waitSpoofDrops(t, before, n)
		})
	}
}
