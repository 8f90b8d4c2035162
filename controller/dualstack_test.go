package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/test/simworld"
)

// dualStackConfig is fastConfig in dual-stack mode (ENABLE_IPv6 with ENABLE_IPv4): IPv4 as without IPv6
// (secondary IPs here), an IPv6 of the primary ENI's /80 beside it.
func dualStackConfig(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.DualStack = true
	return cfg
}

// TestDualStackModeGivesEachPodAnIPv4AndAnIPv6: on an m5.large in dual-stack mode max pods is the IPv4
// number (29: three ENIs of nine secondary IPs, and two host-network pods), and each of the 27 pods the ENIs
// can address gets a distinct IPv4 of an ENI and a distinct IPv6 of the one /80 the node took on its
// primary ENI with a single AssignIpv6Addresses, and no node-local egress address; the next pod is refused
// at the ENI limit, as an IPv4 node's is (the /80 does not raise it). A released pod's two addresses both cool down; a
// restart restores both to the datapath.
func TestDualStackModeGivesEachPodAnIPv4AndAnIPv6(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	r := w.start(dualStackConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	maxPods := r.node.Status().MaxPods
	if want := pool.KubeletMaxPods(dualStackConfig("").PodSettings(), w.sw.NodeInfo().Limits).MaxPods; maxPods != want || maxPods != 29 {
		t.Fatalf("max pods %d, want the IPv4 number %d (29 on an m5.large)", maxPods, want)
	}
	seen := map[string]string{}
	answered := map[string]string{}
	pods := maxPods - 2
	for i := range pods {
		cid := fmt.Sprintf("pod-%d", i)
		a := assignRetrying(t, r.node, cid)
		if !netip.MustParseAddr(a.IP).Is4() || a.IPv6 == "" || !netip.MustParseAddr(a.IPv6).Is6() || a.EgressIP != "" {
			t.Fatalf("%s got IP %q, IPv6 %q, egress %q: want an IPv4, an IPv6 and no egress address", cid, a.IP, a.IPv6, a.EgressIP)
		}
		for _, ip := range []string{a.IP, a.IPv6} {
			if other, dup := seen[ip]; dup {
				t.Fatalf("address %s given to %s and %s", ip, other, cid)
			}
			seen[ip] = cid
		}
		if a.IPv6ENI != w.inst.PrimaryENI || a.IPv6ENIMAC == "" {
			t.Errorf("%s's IPv6 is on ENI %q (MAC %q), want the primary %s", cid, a.IPv6ENI, a.IPv6ENIMAC, w.inst.PrimaryENI)
		}
		answered[cid] = dualAddrs(a.IP, a.IPv6)
	}
	prefix, err := w.primaryPrefix()
	if err != nil {
		t.Fatal(err)
	}
	for ip, cid := range seen {
		if a := netip.MustParseAddr(ip); a.Is6() && !prefix.Contains(a) {
			t.Errorf("%s got %s, outside the primary ENI's /80 %s", cid, ip, prefix)
		}
	}
	if n := w.sim.Counters()["AssignIpv6Addresses"].Calls; n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls for %d pods, want 1", n, pods)
	}
	_, err = r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "pod-extra", IfName: "eth0"}})
	if !errors.Is(err, controller.ErrNoIP) {
		t.Errorf("pod %d: got %v, want ErrNoIP at the ENI limit", pods+1, err)
	}
	if st := r.node.Status(); st.Assigned != pods || st.Warm != 0 {
		t.Errorf("status counts %d assigned and %d free, want %d and 0", st.Assigned, st.Warm, pods)
	}
	if err := w.checkBooks(r.node.Snapshot(), answered); err != nil {
		t.Fatal(err)
	}

	// DEL releases both: neither address goes to the next pod while they cool down.
	freed := r.node.Snapshot().Assignment("pod-0", "eth0")
	rel, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "pod-0", IfName: "eth0"}})
	if err != nil || !rel.Released || rel.Assignment.IPv6 != freed.IPv6 {
		t.Fatalf("releasing pod-0: %+v, %v", rel, err)
	}
	delete(answered, "pod-0")
	cooling := map[string]bool{}
	for _, c := range r.node.Snapshot().Cooldowns {
		cooling[c.IP] = true
	}
	if !cooling[freed.IP] || !cooling[freed.IPv6] {
		t.Errorf("cooldowns %v after pod-0's release, want both %s and %s", r.node.Snapshot().Cooldowns, freed.IP, freed.IPv6)
	}
	_, err = r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "pod-next", IfName: "eth0"}})
	if err == nil {
		t.Errorf("pod-next got an address while pod-0's only free IPv4 cools down")
	}

	// A restart restores both addresses of every pod, to the books and the datapath.
	r.stop()
	r = w.start(dualStackConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	if err := w.checkBooks(r.node.Snapshot(), answered); err != nil {
		t.Fatal(err)
	}
	_, restoredPods := r.node.DatapathState()
	restored := map[string]string{}
	for _, p := range restoredPods {
		if p.IPv6ENI.ID != w.inst.PrimaryENI || len(p.IPv6ENI.MAC) == 0 {
			t.Errorf("pod %s restored with its IPv6 on ENI %q (MAC %v), want the primary", p.ContainerID, p.IPv6ENI.ID, p.IPv6ENI.MAC)
		}
		if !p.IPv6.IsValid() {
			t.Errorf("pod %s restored without its IPv6", p.ContainerID)
			continue
		}
		restored[p.ContainerID] = dualAddrs(p.IP.String(), p.IPv6.String())
	}
	for cid, addrs := range answered {
		if restored[cid] != addrs {
			t.Errorf("restart restored %s with %q, want %q", cid, restored[cid], addrs)
		}
	}
	w.passVirtual(dualStackConfig("").Cooldown+time.Second, nil)
	a := assignRetrying(t, r.node, "pod-later")
	if a.IP != freed.IP || !slices.Contains([]string{freed.IPv6}, a.IPv6) {
		t.Errorf("after the cooldown pod-later got %s and %s, want pod-0's %s and %s back", a.IP, a.IPv6, freed.IP, freed.IPv6)
	}
}

// TestDualStackModeRefusesIPv6ModeBeside: a Config cannot ask for dual-stack and IPv6 mode at once.
func TestDualStackModeRefusesIPv6ModeBeside(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	cfg := dualStackConfig(w.dir)
	cfg.EnableIPv6, cfg.EnablePrefixDelegation = true, true
	_, err := controller.New(cfg, controller.Deps{EC2: w.ec2(nil), Node: w.sw.NodeInfo()})
	if !errors.Is(err, controller.ErrDualStackAndIPv6Mode) {
		t.Errorf("got %v, want ErrDualStackAndIPv6Mode", err)
	}
}
