package sgpool

import (
	"cmp"
	"slices"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// Report is what each set holds (its ENIs, and their addresses assigned, warm and cooling down), with the
// ADDs that wait for it and why it cannot have an address now, by key: every set that has an ENI or
// waiters. servable says whether a free address can be served now (the pool's own test).
func Report(st *journal.State, v *pool.View, l *Line, now time.Time, servable func(eniID, ip string) bool) []api.SecurityGroupSetStatus {
	byKey := map[string]*api.SecurityGroupSetStatus{}
	get := func(set string) *api.SecurityGroupSetStatus {
		if s, ok := byKey[set]; ok {
			return s
		}
		s := &api.SecurityGroupSetStatus{Set: set, ENIs: []string{}}
		byKey[set] = s
		return s
	}
	for _, e := range allSetENIs(st) {
		s := get(e.GroupSet)
		s.ENIs = append(s.ENIs, cmp.Or(e.ID, e.OpID))
		for _, ip := range e.Addrs() {
			switch v.State(ip) {
			case pool.IPAssigned:
				s.Assigned++
			case pool.IPCooldown, pool.IPLeaving:
				s.Cooldown++
			default:
				if e.ServesSet(e.GroupSet) && servable(e.ID, ip) {
					s.Warm++
				}
			}
		}
	}
	if l != nil {
		for _, d := range l.Demand() {
			get(d.Set).Waiting = d.Waiting
		}
		for set, why := range l.Blocks(now) {
			get(set).Blocked = why
		}
	}
	out := make([]api.SecurityGroupSetStatus, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b api.SecurityGroupSetStatus) int { return cmp.Compare(a.Set, b.Set) })
	return out
}
