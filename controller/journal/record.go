package journal

import (
	"reflect"
	"slices"
)

// attKey names an assignment: one container interface.
type attKey struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// record is one line of the journal: a whole state (the first record, and after compaction) or the change one
// save made. Puts replace the item with the same key or append it; drops remove it by key.
type record struct {
	Seq        uint64 `json:"seq"`
	Snapshot   *State `json:"snapshot,omitempty"`
	InstanceID string `json:"instanceID,omitempty"`

	ENIs            []ENI        `json:"enis,omitempty"`
	DropENIs        []string     `json:"dropENIs,omitempty"`
	IPOps           []IPOp       `json:"ipOps,omitempty"`
	DropIPOps       []string     `json:"dropIPOps,omitempty"`
	Assignments     []Assignment `json:"assignments,omitempty"`
	DropAssignments []attKey     `json:"dropAssignments,omitempty"`
	Cooldowns       []Cooldown   `json:"cooldowns,omitempty"`
	DropCooldowns   []string     `json:"dropCooldowns,omitempty"`
	Unassigned      []Unassigned `json:"unassigned,omitempty"`
	DropUnassigned  []string     `json:"dropUnassigned,omitempty"`
}

// books is the last saved state, indexed by key, so a save costs map lookups to diff and the change's size to
// write. It is owned by the Store and changed only under its lock.
type books struct {
	instanceID  string
	enis        map[string]ENI
	ipOps       map[string]IPOp
	assignments map[attKey]Assignment
	cooldowns   map[string]Cooldown
	unassigned  map[string]Unassigned
}

func newBooks(st *State) *books {
	b := &books{instanceID: st.InstanceID, enis: make(map[string]ENI, len(st.ENIs)), ipOps: make(map[string]IPOp, len(st.IPOps)),
		assignments: make(map[attKey]Assignment, len(st.Assignments)), cooldowns: make(map[string]Cooldown, len(st.Cooldowns)),
		unassigned: make(map[string]Unassigned, len(st.Unassigned))}
	for _, e := range st.ENIs {
		b.enis[e.OpID] = e.Clone()
	}
	for _, op := range st.IPOps {
		op.IPs = slices.Clone(op.IPs)
		b.ipOps[op.OpID] = op
	}
	for _, a := range st.Assignments {
		b.assignments[attKey{a.ContainerID, a.IfName}] = a
	}
	for _, c := range st.Cooldowns {
		b.cooldowns[c.IP] = c
	}
	for _, u := range st.Unassigned {
		b.unassigned[u.IP] = u
	}
	return b
}

// unique reports whether st has no two items under one key; a delta cannot describe such a state, so it is
// then saved as a snapshot.
func (b *books) unique(st *State) bool {
	return len(st.ENIs) == len(b.enis) && len(st.IPOps) == len(b.ipOps) &&
		len(st.Assignments) == len(b.assignments) && len(st.Cooldowns) == len(b.cooldowns) &&
		len(st.Unassigned) == len(b.unassigned)
}

// diff returns the record that turns the books into st and applies it to the books. Cost: one map lookup per
// item of st, plus a set of the current keys only for a kind of item that lost some.
func (b *books) diff(st *State) *record {
	r := &record{}
	if st.InstanceID != b.instanceID {
		r.InstanceID = st.InstanceID
		b.instanceID = st.InstanceID
	}
	r.ENIs, r.DropENIs = diffKind(st.ENIs, b.enis, func(e ENI) string { return e.OpID }, eqDeep[ENI],
		ENI.Clone)
	r.IPOps, r.DropIPOps = diffKind(st.IPOps, b.ipOps, func(o IPOp) string { return o.OpID }, eqDeep[IPOp],
		func(o IPOp) IPOp { o.IPs = slices.Clone(o.IPs); return o })
	r.Assignments, r.DropAssignments = diffKind(st.Assignments, b.assignments,
		func(a Assignment) attKey { return attKey{a.ContainerID, a.IfName} }, eqValue[Assignment], same[Assignment])
	r.Cooldowns, r.DropCooldowns = diffKind(st.Cooldowns, b.cooldowns, func(c Cooldown) string { return c.IP },
		eqValue[Cooldown], same[Cooldown])
	r.Unassigned, r.DropUnassigned = diffKind(st.Unassigned, b.unassigned, func(u Unassigned) string { return u.IP },
		eqValue[Unassigned], same[Unassigned])
	return r
}

func eqDeep[T any](a, b T) bool         { return reflect.DeepEqual(a, b) }
func eqValue[T comparable](a, b T) bool { return a == b }
func same[T any](v T) T                 { return v }

// diffKind compares one kind of item with its saved copies: the changed or new ones to put, the keys to drop.
// It updates saved to match cur.
func diffKind[K comparable, T any](cur []T, saved map[K]T, key func(T) K, eq func(a, b T) bool, keep func(T) T) ([]T, []K) {
	var puts []T
	found := 0
	for _, v := range cur {
		k := key(v)
		old, ok := saved[k]
		if ok {
			found++
			if eq(old, v) {
				continue
			}
		}
		puts = append(puts, v)
	}
	var drops []K
	if found < len(saved) {
		present := make(map[K]struct{}, len(cur))
		for _, v := range cur {
			present[key(v)] = struct{}{}
		}
		for k := range saved {
			if _, ok := present[k]; !ok {
				drops = append(drops, k)
			}
		}
		for _, k := range drops {
			delete(saved, k)
		}
	}
	for _, v := range puts {
		saved[key(v)] = keep(v)
	}
	return puts, drops
}

// empty reports whether the record changes nothing but the sequence number.
func (r *record) empty() bool {
	return r.Snapshot == nil && r.InstanceID == "" && len(r.ENIs)+len(r.DropENIs)+len(r.IPOps)+len(r.DropIPOps)+
		len(r.Assignments)+len(r.DropAssignments)+len(r.Cooldowns)+len(r.DropCooldowns)+
		len(r.Unassigned)+len(r.DropUnassigned) == 0
}

// apply replays the record onto st (replay at open; the same rules diff assumed).
func (r *record) apply(st *State) {
	if r.Snapshot != nil {
		*st = *r.Snapshot
	}
	if r.InstanceID != "" {
		st.InstanceID = r.InstanceID
	}
	st.ENIs = applyKind(st.ENIs, r.ENIs, r.DropENIs, func(e ENI) string { return e.OpID })
	st.IPOps = applyKind(st.IPOps, r.IPOps, r.DropIPOps, func(o IPOp) string { return o.OpID })
	st.Assignments = applyKind(st.Assignments, r.Assignments, r.DropAssignments,
		func(a Assignment) attKey { return attKey{a.ContainerID, a.IfName} })
	st.Cooldowns = applyKind(st.Cooldowns, r.Cooldowns, r.DropCooldowns, func(c Cooldown) string { return c.IP })
	st.Unassigned = applyKind(st.Unassigned, r.Unassigned, r.DropUnassigned, func(u Unassigned) string { return u.IP })
	st.Seq = r.Seq
	st.Version = Version
}

func applyKind[K comparable, T any](cur, puts []T, drops []K, key func(T) K) []T {
	if len(drops) > 0 {
		gone := make(map[K]bool, len(drops))
		for _, k := range drops {
			gone[k] = true
		}
		cur = slices.DeleteFunc(cur, func(v T) bool { return gone[key(v)] })
	}
	for _, v := range puts {
		k := key(v)
		if i := slices.IndexFunc(cur, func(x T) bool { return key(x) == k }); i >= 0 {
			cur[i] = v
		} else {
			cur = append(cur, v)
		}
	}
	return cur
}
