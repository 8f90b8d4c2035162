package sgpool

import (
	"fmt"
	"strings"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// Limits bound the sets' ENIs.
type Limits struct {
	// Slots is how many ENIs the node may hold, primary included, less those others hold on the instance.
	Slots int
	// IPsPerENI is how many slots (secondary IPs or /28 prefixes) an ENI takes.
	IPsPerENI int
	// Grain is how many addresses one slot brings: 1, or journal.PrefixAddrs in prefix mode.
	Grain int
}

// ActionKind is what an Action does.
type ActionKind int

const (
	// NewENI plans an ENI with the set's groups and Slots slots.
	NewENI ActionKind = iota + 1
	// AddSlots assigns Slots more slots to the set's ENI.
	AddSlots
	// ReleaseENI gives the set's ENI back: no pod has held it for the release delay.
	ReleaseENI
)

// Action is one change Decide asks for.
type Action struct {
	Kind   ActionKind
	Set    string
	Groups []string
	ENI    string
	Slots  int
}

// NoSlot is a set whose waiting pods no ENI slot can serve.
type NoSlot struct {
	Demand Demand
	// Why names the limit and what holds the slots.
	Why string
}

// Decide is one round of the sets' arithmetic over the books (v is their view at now): for each set ADDs
// wait for, more slots on its ENIs with room, else a new ENI while a slot is free, else a NoSlot; and the
// sets' ENIs that no pod has held for releaseAfter go back. A set's free addresses are served first; what
// its ENIs in flight will bring counts as served. idle keeps the clock of empty ENIs between rounds.
func Decide(st *journal.State, v *pool.View, demand []Demand, l Limits, idle *Idle, releaseAfter time.Duration, now time.Time) (acts []Action, full []NoSlot) {
	held := heldSlots(st)
	waiting := map[string]bool{}
	for _, d := range demand {
		waiting[d.Set] = true
		need := d.Waiting - freeIn(st, v, d.Set) - inFlight(st, d.Set)
		if need <= 0 {
			continue
		}
		// One address beyond the pods waiting, in single IPs: the set's next pod finds it free.
		want := slotsFor(need+spare(l.Grain), l.Grain)
		for _, e := range setENIs(st, d.Set) {
			if room := l.IPsPerENI - len(e.IPs); room > 0 && e.Usable() && !assigning(st, e.ID) && want > 0 {
				k := min(want, room)
				acts = append(acts, Action{Kind: AddSlots, Set: d.Set, Groups: d.Groups, ENI: e.ID, Slots: k})
				want -= k
			}
		}
		if want <= 0 || pendingENI(st, d.Set) {
			continue
		}
		if held.total() >= l.Slots {
			full = append(full, NoSlot{Demand: d, Why: held.why(l)})
			continue
		}
		acts = append(acts, Action{Kind: NewENI, Set: d.Set, Groups: d.Groups, Slots: min(want, l.IPsPerENI)})
		held.sets[d.Set]++
	}
	for _, e := range allSetENIs(st) {
		if !e.Usable() || waiting[e.GroupSet] || inUse(v, e) {
			idle.clear(e.ID)
			continue
		}
		if since := idle.since(e.ID, now); now.Sub(since) >= releaseAfter || Key(e.SecurityGroups) != e.GroupSet {
			acts = append(acts, Action{Kind: ReleaseENI, Set: e.GroupSet, Groups: Groups(e.GroupSet), ENI: e.ID})
		}
	}
	idle.keep(st)
	return acts, full
}

func slotsFor(n, grain int) int { return (n + grain - 1) / grain }

// spare is the free addresses a set's growth brings beyond its waiting pods: one in single IPs; a prefix
// brings fifteen anyway.
func spare(grain int) int {
	if grain > 1 {
		return 0
	}
	return 1
}

// setENIs are the books' ENIs of set, every state.
func setENIs(st *journal.State, set string) []*journal.ENI {
	var out []*journal.ENI
	for i := range st.ENIs {
		if e := &st.ENIs[i]; e.GroupSet == set {
			out = append(out, e)
		}
	}
	return out
}

// allSetENIs are the books' ENIs of every set.
func allSetENIs(st *journal.State) []*journal.ENI {
	var out []*journal.ENI
	for i := range st.ENIs {
		if e := &st.ENIs[i]; e.GroupSet != "" {
			out = append(out, e)
		}
	}
	return out
}

// freeIn is the set's addresses a pod could take now.
func freeIn(st *journal.State, v *pool.View, set string) int {
	n := 0
	for _, e := range setENIs(st, set) {
		if !e.Usable() {
			continue
		}
		for _, ip := range e.Addrs() {
			if v.State(ip) == pool.IPFree {
				n++
			}
		}
	}
	return n
}

// inUse reports whether a pod holds an address of e or one cools down there.
func inUse(v *pool.View, e *journal.ENI) bool {
	for _, ip := range e.Addrs() {
		if v.State(ip) != pool.IPFree {
			return true
		}
	}
	return false
}

// inFlight is the addresses the set's ENIs on their way and its assigns in flight will bring.
func inFlight(st *journal.State, set string) int {
	n := 0
	for _, e := range setENIs(st, set) {
		if e.Pending() {
			n += e.PendingAddrs()
		}
	}
	for _, op := range st.IPOps {
		if e := st.ENIByID(op.ENI); op.Kind == journal.AssignIPs && e != nil && e.GroupSet == set {
			n += op.Addrs()
		}
	}
	return n
}

// pendingENI reports whether an ENI of the set is planned or created, not attached yet.
func pendingENI(st *journal.State, set string) bool {
	for _, e := range setENIs(st, set) {
		if e.Pending() {
			return true
		}
	}
	return false
}

// assigning reports whether an assign to the ENI is in flight or of unknown outcome.
func assigning(st *journal.State, eniID string) bool {
	for _, op := range st.IPOps {
		if op.Kind == journal.AssignIPs && op.ENI == eniID {
			return true
		}
	}
	return false
}

// slots is what holds the node's ENI slots, as the default pool counts them: usable and pending ENIs.
type slots struct {
	primary, dflt int
	sets          map[string]int
}

func heldSlots(st *journal.State) slots {
	h := slots{sets: map[string]int{}}
	for _, e := range st.ENIs {
		switch {
		case !e.Usable() && e.State != journal.Planned && e.State != journal.Created:
		case e.Primary:
			h.primary++
		case e.GroupSet != "":
			h.sets[e.GroupSet]++
		default:
			h.dflt++
		}
	}
	return h
}

func (h slots) total() int {
	n := h.primary + h.dflt
	for _, k := range h.sets {
		n += k
	}
	return n
}

// why is the NoSlot line: the limit, and what holds the slots.
func (h slots) why(l Limits) string {
	var holders []string
	if h.dflt > 0 {
		holders = append(holders, plural(h.dflt, "ENI")+" of the default pool")
	}
	for set, k := range h.sets {
		holders = append(holders, fmt.Sprintf("%s of set %s", plural(k, "ENI"), set))
	}
	held := "the primary ENI"
	if len(holders) > 0 {
		held += ", " + strings.Join(holders, ", ")
	}
	return fmt.Sprintf("no ENI slot for the set: the node may hold %d ENIs (its instance type's limit, or MAX_ENI, "+
		"less the ENIs others attached) and they are %s, so it holds at most %s; the pod's ADD is retried "+
		"until a set's pods go, or it needs a node with more ENIs", l.Slots, held, plural(max(l.Slots-1, 0), "set"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
