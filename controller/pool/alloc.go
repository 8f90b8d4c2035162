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
	}
	for _, c := range st.Cooldowns {
		if now.Before(c.Until) {
			v.cooling[c.IP] = true
		}
	}
	for _, op := range st.IPOps {
		if op.Kind == journal.UnassignIPs {
			for _, ip := range op.IPs {
				v.leaving[ip] = true
			}
		}
	}
	return v
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

// usableENIs returns the usable ENIs, primary first then by device index: pods are packed onto the first
// ENIs so that the last ones empty out and can be released.
func (v *View) usableENIs() []*journal.ENI {
	var out []*journal.ENI
	for i := range v.st.ENIs {
		if v.st.ENIs[i].Usable() {
			out = append(out, &v.st.ENIs[i])
		}
	}
	slices.SortFunc(out, func(a, b *journal.ENI) int { return cmp.Compare(a.DeviceIndex, b.DeviceIndex) })
	return out
}

// Pick returns a free IP that avail allows and its ENI, or ok false when there is none. avail says whether
// the node can serve an IP of the ENI now (its datapath is up, EC2 has not stopped listing the IP); nil
// allows every free IP.
func (v *View) Pick(avail func(eniID, ip string) bool) (ip string, eni *journal.ENI, ok bool) {
	for _, e := range v.usableENIs() {
		for _, ip := range e.IPs {
			if v.State(ip) == IPFree && (avail == nil || avail(e.ID, ip)) {
				return ip, e, true
			}
		}
	}
	return "", nil, false
}

// Counts summarises the books for the arithmetic.
func (v *View) Counts() Counts {
	var c Counts
	for i := range v.st.ENIs {
		e := &v.st.ENIs[i]
		switch {
		case e.State == journal.Planned || e.State == journal.Created:
			c.PendingENIs++
			c.PendingIPs += max(e.WantIPs, len(e.IPs))
		case e.Usable():
			ec := ENICount{ID: e.ID, Primary: e.Primary, IPs: len(e.IPs)}
			for _, ip := range e.IPs {
				switch v.State(ip) {
				case IPAssigned:
					ec.Assigned++
				case IPCooldown, IPLeaving:
					ec.Cooldown++
				}
			}
			c.ENIs = append(c.ENIs, ec)
		}
	}
	for _, op := range v.st.IPOps {
		if op.Kind == journal.AssignIPs {
			c.PendingIPs += op.Count
		}
	}
	return c
}

// Releasable returns up to n free IPs to give back, taken from the last ENIs first (the ones to empty out).
func (v *View) Releasable(n int) map[string][]string {
	out := map[string][]string{}
	enis := v.usableENIs()
	for i := len(enis) - 1; i >= 0 && n > 0; i-- {
		e := enis[i]
		for j := len(e.IPs) - 1; j >= 0 && n > 0; j-- {
			if v.State(e.IPs[j]) == IPFree {
				out[e.ID] = append(out[e.ID], e.IPs[j])
				n--
			}
		}
	}
	return out
}

// WithRoom returns the usable ENIs that can take more secondary IPs, and how many each.
func (v *View) WithRoom(perENI int) map[string]int {
	out := map[string]int{}
	for _, e := range v.usableENIs() {
		if room := perENI - len(e.IPs); room > 0 {
			out[e.ID] = room
		}
	}
	return out
}
