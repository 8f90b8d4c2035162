package sgpool

import (
	"time"

	"github.com/eniwire/eniwire/controller/journal"
)

// Idle is when each set's ENI last became empty: it goes back after the release delay, so a set whose pods
// are replaced one by one (a rollout) keeps its ENI. Kept in memory only: after a restart an empty ENI waits
// the delay again. Who may touch it: the pool manager's Run loop only.
type Idle struct{ at map[string]time.Time }

// since is when e became empty, now if it just did.
func (i *Idle) since(eniID string, now time.Time) time.Time {
	if i.at == nil {
		i.at = map[string]time.Time{}
	}
	t, ok := i.at[eniID]
	if !ok {
		i.at[eniID] = now
		return now
	}
	return t
}

func (i *Idle) clear(eniID string) { delete(i.at, eniID) }

// keep forgets ENIs the books no longer hold.
func (i *Idle) keep(st *journal.State) {
	for id := range i.at {
		if st.ENIByID(id) == nil {
			delete(i.at, id)
		}
	}
}
