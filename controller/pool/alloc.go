package pool

import (
	"cmp"
	"slices"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
)

// IPState is what the books say about one secondary IP.
type IPState int

const (
	IPFree IPState = iota
	IPAssigned
	IPCooldown
	// IPLeaving: an UnassignPrivateIpAddresses for it is journaled.
	IPLeaving
)

// View indexes a State for the pool's questions. It is built under the controller's lock and not kept.
type View struct {
	st       *journal.State
	now      time.Time
	assigned map[string]bool
	cooling  map[string]bool
	leaving  map[string]bool
}

// NewView indexes st at time now.
func NewView(st *journal.State, now time.Time) *View {
	v := &View{st: st, now: now, assigned: map[string]bool{}, cooling: map[string]bool{}, leaving: map[string]bool{}}
	for _, a := range st.Assignments {
		v.assigned[a.IP] = true
		if a.IPv6 != "" {
			v.assigned[a.IPv6] = true
		}
	}
	for _, c := range st.Cooldowns {
		if now.Before(c.Until) {
			v.cooling[c.IP] = true
		}
	}
	for _, op := range st.IPOps {
		if op.Kind == journal.UnassignIPs {
			for _, slot := range op.IPs {
				for _, ip := range journal.Addresses(slot) {
					v.leaving[ip] = true
				}
			}
		}
	}
	return v
}

// Assigned records that ip was just given to a pod, as the books' assignment record says once written: the
// view that picked ip answers for the books after the assignment without being built again.
func (v *View) Assigned(ip string) {
	v.assigned[ip] = true
	delete(v.cooling, ip)
}

// State returns what the books say about ip.
func (v *View) State(ip string) IPState {
	switch {
	case v.assigned[ip]:
		return IPAssigned
	case v.leaving[ip]:
		return IPLeaving
	case v.cooling[ip]:
		return IPCooldown
	}
	return IPFree
}

// usableENIs returns the usable ENIs of a pool, primary first then by device index: pods are packed onto
// the first ENIs so that the last ones empty out and can be released. set names the pool: "" is the node's
// default pool, any other the ENIs of that security-group set (journal.ENI.GroupSet).
func (v *View) usableENIs(set string) []*journal.ENI {
	var out []*journal.ENI
	for i := range v.st.ENIs {
		if e := &v.st.ENIs[i]; e.ServesSet(set) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *journal.ENI) int { return cmp.Compare(a.DeviceIndex, b.DeviceIndex) })
	return out
}

// Pick returns a free IP that avail allows and its ENI, or ok false when there is none. avail says whether
// the node can serve an IP of the ENI now (its datapath is up, EC2 has not stopped listing the IP); nil
// allows every free IP. Pods are packed densely: ENIs in device order, and on an ENI the fullest slot first
// (the prefix with the most addresses in use); among slots with none in use, single IPs before prefixes, so
// that empty prefixes stay empty and can be released.
func (v *View) Pick(avail func(eniID, ip string) bool) (ip string, eni *journal.ENI, ok bool) {
	return v.PickInSet("", avail)
}

// PickInSet is Pick among the ENIs of a security-group set (journal.ENI.GroupSet; "" is the default pool).
func (v *View) PickInSet(set string, avail func(eniID, ip string) bool) (ip string, eni *journal.ENI, ok bool) {
	for _, e := range v.usableENIs(set) {
		slots := slices.Clone(e.IPs)
		used := make(map[string]int, len(slots))
		for _, s := range slots {
			for _, a := range journal.Addresses(s) {
				if v.State(a) != IPFree {
					used[s]++
				}
			}
		}
		slices.SortStableFunc(slots, func(a, b string) int {
			if c := cmp.Compare(used[b], used[a]); c != 0 {
				return c
			}
			return cmp.Compare(journal.AddrCount(a), journal.AddrCount(b))
		})
		for _, s := range slots {
			for _, ip := range journal.Addresses(s) {
				if v.State(ip) == IPFree && (avail == nil || avail(e.ID, ip)) {
					return ip, e, true
				}
			}
		}
	}
	return "", nil, false
}

// emptying reports whether e holds a prefix that no pod holds but some address of which is cooling down or
// leaving: it will be empty once they are done.
func (v *View) emptying(e *journal.ENI) bool {
	for _, slot := range e.IPs {
		if !journal.IsPrefix(slot) || v.emptyPrefix(slot) {
			continue
		}
		held := false
		for _, a := range journal.Addresses(slot) {
			if v.State(a) == IPAssigned {
				held = true
				break
			}
		}
		if !held {
			return true
		}
	}
	return false
}

// emptyPrefix reports whether slot is a prefix none of whose addresses is in use, cooling down or leaving.
func (v *View) emptyPrefix(slot string) bool {
	if !journal.IsPrefix(slot) {
		return false
	}
	for _, a := range journal.Addresses(slot) {
		if v.State(a) != IPFree {
			return false
		}
	}
	return true
}

// Counts summarises the books for the arithmetic.
func (v *View) Counts() Counts {
	var c Counts
	for i := range v.st.ENIs {
		e := &v.st.ENIs[i]
		switch {
		case e.Pending() && e.GroupSet != "":
			c.PendingENIs++ // a slot, but none of its addresses is the default pool's
		case e.Pending():
			c.PendingENIs++
			c.PendingIPs += e.PendingAddrs()
		case e.Usable() && e.GroupSet != "":
			c.ENIs = append(c.ENIs, v.setENICount(e))
		case e.Usable():
			ec := ENICount{ID: e.ID, Primary: e.Primary, Subnet: e.SubnetID, Slots: len(e.IPs)}
			for _, slot := range e.IPs {
				switch {
				case v.emptyPrefix(slot):
					ec.EmptyPrefixes++
				case !journal.IsPrefix(slot) && v.State(slot) == IPFree:
					ec.FreeSingles++
				}
				for _, ip := range journal.Addresses(slot) {
					ec.IPs++
					switch v.State(ip) {
					case IPAssigned:
						ec.Assigned++
					case IPCooldown, IPLeaving:
						ec.Cooldown++
					}
				}
			}
			c.ENIs = append(c.ENIs, ec)
		}
	}
	for _, op := range v.st.IPOps {
		if e := v.st.ENIByID(op.ENI); op.Kind == journal.AssignIPs && (e == nil || e.GroupSet == "") {
			c.PendingIPs += op.Addrs() // none for an IPv6 /80
		}
	}
	return c
}

// Releasable returns slots worth up to n free addresses to give back, taken from the last ENIs first (the
// ones to empty out): free single IPs (unless prefixesOnly), then prefixes with no address in use, cooling
// down or leaving. An ENI whose prefix only waits for its cooldowns to end stops the search: that prefix
// goes next, rather than one of an earlier ENI, which would leave the last ENI holding the pool.
func (v *View) Releasable(n int, prefixesOnly bool) map[string][]string {
	out := map[string][]string{}
	enis := v.usableENIs("")
	for i := len(enis) - 1; i >= 0 && n > 0; i-- {
		e := enis[i]
		if i < len(enis)-1 && v.emptying(enis[i+1]) {
			break
		}
		for j := len(e.IPs) - 1; j >= 0 && n > 0 && !prefixesOnly; j-- {
			if s := e.IPs[j]; !journal.IsPrefix(s) && v.State(s) == IPFree {
				out[e.ID] = append(out[e.ID], s)
				n--
			}
		}
		for j := len(e.IPs) - 1; j >= 0 && n >= journal.PrefixAddrs; j-- {
			if s := e.IPs[j]; v.emptyPrefix(s) {
				out[e.ID] = append(out[e.ID], s)
				n -= journal.PrefixAddrs
			}
		}
	}
	return out
}

// setENICount is how the default pool's arithmetic sees the ENI of a security-group set: its slot counts
// against the ENI limit and its pods against max pods, but its free addresses are its set's alone and it
// takes no growth of the default pool; the set's pool (controller/sgpool) grows it and gives it back.
func (v *View) setENICount(e *journal.ENI) ENICount {
	ec := ENICount{ID: e.ID, Subnet: e.SubnetID, Slots: len(e.IPs), Closed: true, Set: true}
	for _, ip := range e.Addrs() {
		switch v.State(ip) {
		case IPAssigned:
			ec.Assigned++
		case IPCooldown, IPLeaving:
			ec.Cooldown++
		}
	}
	ec.IPs = ec.Assigned + ec.Cooldown
	return ec
}
