package policywatch

import (
	"context"
	"net/netip"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestEnforcementOffClearsWhatAnEarlierAgentWrote: with enforcement off, every pod of the node is cleared,
// so none stays isolated by state an agent with enforcement on left in the pinned maps.
func TestEnforcementOffClearsWhatAnEarlierAgentWrote(t *testing.T) {
	d := newFakeDriver()
	ctx := context.Background()
	isolated := dptypes.PodPolicy{IngressIsolated: true}
	for _, a := range []string{"10.0.1.10", "10.0.1.11"} {
		if err := d.SetPodPolicy(ctx, addr(a), isolated); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClearAll(ctx, d, []netip.Addr{addr("10.0.1.10"), addr("10.0.1.11"), addr("10.0.1.12")}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.0.1.10", "10.0.1.11"} {
		if p, ok := d.get(addr(a)); ok {
			t.Errorf("%s still has %s", a, describe(p))
		}
	}
}
