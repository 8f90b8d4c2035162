package controller_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/test/simworld"
)

// TestIPv6PodsHoldDistinctIPv4EgressAddressesThatSurviveARestart: in IPv6 mode every pod's assignment also
// carries a node-local IPv4 egress address of 169.254.172.0/22, no two pods the same; an agent started again
// on the same journal answers each pod with the address it had, and a new pod gets none of theirs; a
// released pod's address cools down before another pod gets it.
func TestIPv6PodsHoldDistinctIPv4EgressAddressesThatSurviveARestart(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	r := w.start(ipv6Config(w.dir), nil, nil)
	waitReady(t, r.node)
	held := map[string]string{} // egress address -> pod
	for i := range 20 {
		cid := fmt.Sprintf("pod-%d", i)
		a := assignRetrying(t, r.node, cid)
		egress, err := netip.ParseAddr(a.EgressIP)
		if err != nil || !dptypes.IPv4EgressRange.Contains(egress) {
			t.Fatalf("%s got egress address %q, want one of %s", cid, a.EgressIP, dptypes.IPv4EgressRange)
		}
		if other, dup := held[a.EgressIP]; dup {
			t.Fatalf("egress address %s given to %s and %s", a.EgressIP, other, cid)
		}
		held[a.EgressIP] = cid
	}
	r.stop()

	r = w.start(ipv6Config(w.dir), nil, nil)
	waitReady(t, r.node)
	for egress, cid := range held {
		a, err := r.node.Check(context.Background(), api.CheckRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}})
		if err != nil {
			t.Fatalf("checking %s after the restart: %v", cid, err)
		}
		if a.EgressIP != egress {
			t.Errorf("after the restart %s has egress address %q, had %s", cid, a.EgressIP, egress)
		}
	}
	a := assignRetrying(t, r.node, "pod-new")
	if other, dup := held[a.EgressIP]; dup || a.EgressIP == "" {
		t.Fatalf("pod-new got egress address %q, held by %s", a.EgressIP, other)
	}
	freed := r.node.Snapshot().Assignment("pod-3", "eth0").EgressIP
	if _, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "pod-3", IfName: "eth0"}}); err != nil {
		t.Fatal(err)
	}
	// Issue 36 item 17 changed this: a released pod's egress address cools down as its IPv6 does (the node's
	// SNAT conntrack entries of its flows would deliver their replies to the next pod there), and is the
	// lowest free one again once the cooldown is over.
	if a := assignRetrying(t, r.node, "pod-after"); a.EgressIP == freed {
		t.Errorf("pod-after got egress address %s, pod-3's a moment ago and still cooling down", a.EgressIP)
	}
	w.passVirtual(ipv6Config("").Cooldown+time.Second, nil)
	if a := assignRetrying(t, r.node, "pod-later"); a.EgressIP != freed {
		t.Errorf("after the cooldown pod-later got egress address %s, want the lowest free one %s (pod-3's)", a.EgressIP, freed)
	}
}

// IPv4 pods hold no egress address.
func TestIPv4PodsHoldNoEgressAddress(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200})
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	if a := assignRetrying(t, r.node, "pod-0"); a.EgressIP != "" {
		t.Errorf("an IPv4 pod got egress address %s", a.EgressIP)
	}
}
