package pool_test

import (
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// PickIPv6 hands out the /80's addresses from its second one up, skipping those pods hold and those cooling
// down; an ENI without a /80 gives none.
func TestPickIPv6TakesTheLowestAddressNeitherHeldNorCooling(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	primary := journal.ENI{OpID: "p", ID: "eni-p", State: journal.Attached, Primary: true,
		IPv6Prefixes: []string{"2600:1f14:e1a:e101:3863::/80"}}
	for _, c := range []struct {
		name        string
		assigned    []string
		cooling     []string
		cooledUntil time.Time
		want        string
	}{
		{name: "an empty /80 gives its second address", want: "2600:1f14:e1a:e101:3863::1"},
		{name: "held addresses are skipped", assigned: []string{"2600:1f14:e1a:e101:3863::1", "2600:1f14:e1a:e101:3863::2"},
			want: "2600:1f14:e1a:e101:3863::3"},
		{name: "an address cooling down is skipped", assigned: []string{"2600:1f14:e1a:e101:3863::2"},
			cooling: []string{"2600:1f14:e1a:e101:3863::1"}, cooledUntil: now.Add(time.Minute), want: "2600:1f14:e1a:e101:3863::3"},
		{name: "an address whose cooldown ended comes back", cooling: []string{"2600:1f14:e1a:e101:3863::1"},
			cooledUntil: now.Add(-time.Second), want: "2600:1f14:e1a:e101:3863::1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &journal.State{ENIs: []journal.ENI{primary}}
			for i, ip := range c.assigned {
				st.Assignments = append(st.Assignments, journal.Assignment{ContainerID: string(rune('a' + i)), IfName: "eth0", IP: ip, ENI: "eni-p"})
			}
			for _, ip := range c.cooling {
				st.Cooldowns = append(st.Cooldowns, journal.Cooldown{IP: ip, ENI: "eni-p", Until: c.cooledUntil})
			}
			ip, e, ok := pool.NewView(st, now).PickIPv6(nil)
			if !ok || ip != c.want || e.ID != "eni-p" {
				t.Errorf("PickIPv6 = %q on %v (%v), want %s on eni-p", ip, e, ok, c.want)
			}
		})
	}
	st := &journal.State{ENIs: []journal.ENI{{OpID: "p", ID: "eni-p", State: journal.Attached, Primary: true, IPs: []string{"10.0.0.5"}}}}
	if ip, _, ok := pool.NewView(st, now).PickIPv6(nil); ok {
		t.Errorf("an ENI without a /80 gave %s", ip)
	}
}
