package policywatch

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestTheWatchCompilesTheFirstListsOnceAndFollowsChanges: the node's pod under a policy gets its state
// written once from the first lists; a new allow adds its peer, a removed policy clears the isolation, and
// a pod of another node is never written.
func TestTheWatchCompilesTheFirstListsOnceAndFollowsChanges(t *testing.T) {
	d := newFakeDriver()
	s := start(t, d,
		namespace("shop", nil),
		pod("shop", "web", node, "10.0.1.10", map[string]string{"app": "web"}),
		pod("shop", "client", "node-b", "10.0.2.20", map[string]string{"app": "client"}),
		policy("shop", "deny", "web", "", 0),
	)
	web := addr("10.0.1.10")
	if p, ok := d.get(web); !ok || !p.IngressIsolated || len(p.Ingress) != 0 {
		t.Fatalf("after the first lists: %v (%v), want ingress isolated with nothing allowed", describe(p), ok)
	}
	if n := d.count("set 10.0.1.10"); n != 1 {
		t.Errorf("the first lists wrote web's state %d times, want once", n)
	}
	if n := d.count("set 10.0.2.20"); n != 0 {
		t.Errorf("a pod of another node was written %d times", n)
	}

	ctx := context.Background()
	if _, err := s.client.NetworkingV1().NetworkPolicies("shop").Create(ctx, policy("shop", "allow-client", "web", "client", 8080), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "the allow's peer in web's state", func() bool {
		p, _ := d.get(web)
		return len(p.Ingress) == 1 && p.Ingress[0].Peer.String() == "10.0.2.20/32" &&
			len(p.Ingress[0].Ports) == 1 && p.Ingress[0].Ports[0] == dptypes.PortRange{Protocol: 6, First: 8080, Last: 8080}
	})

	for _, name := range []string{"deny", "allow-client"} {
		if err := s.client.NetworkingV1().NetworkPolicies("shop").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d.waitFor(t, "web no longer isolated", func() bool {
		p, _ := d.get(web)
		return !p.Isolated()
	})
	if got := s.w.Status(); got != "enforcing: 0 of 1 pod addresses isolated" {
		t.Errorf("status %q", got)
	}
}
