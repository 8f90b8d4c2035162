package sgpool

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Line is the ADDs waiting for an address of their set, and why a set cannot have one (Block). Unlike the
// default pool's line, each set waits on its own: an ADD whose set waits for an ENI holds back no pod of
// another set or of the default pool. Who may touch it: any goroutine, under its own lock.
type Line struct {
	mu      sync.Mutex
	waiters map[string][]*Waiter
	blocks  map[string]block
}

// Waiter is one ADD waiting for an address of its set.
type Waiter struct {
	set      string
	groups   []string
	policies []string
	poke     chan struct{}
}

// Poked is signalled when the pool may have an address for the waiter, or news of why it cannot.
func (w *Waiter) Poked() <-chan struct{} { return w.poke }

// Set is the waiter's set key.
func (w *Waiter) Set() string { return w.set }

// block is why a set cannot get an address, until when (the zero time: until the next round says otherwise).
type block struct {
	why   string
	until time.Time
}

// Demand is a set that ADDs wait for.
type Demand struct {
	Set      string
	Groups   []string
	Policies []string
	Waiting  int
}

// Join puts an ADD of the set of groups, which policies selected, in line.
func (l *Line) Join(groups, policies []string) *Waiter {
	groups = Normalize(groups)
	w := &Waiter{set: Key(groups), groups: groups, policies: slices.Clone(policies), poke: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiters == nil {
		l.waiters = map[string][]*Waiter{}
	}
	l.waiters[w.set] = append(l.waiters[w.set], w)
	return w
}

// Leave takes w out of the line.
func (l *Line) Leave(w *Waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := slices.DeleteFunc(l.waiters[w.set], func(o *Waiter) bool { return o == w })
	if len(ws) == 0 {
		delete(l.waiters, w.set)
		return
	}
	l.waiters[w.set] = ws
}

// Demand lists the sets ADDs wait for, by key, with the policies their waiters named.
func (l *Line) Demand() []Demand {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Demand, 0, len(l.waiters))
	for set, ws := range l.waiters {
		d := Demand{Set: set, Groups: ws[0].groups, Waiting: len(ws)}
		for _, w := range ws {
			d.Policies = append(d.Policies, w.policies...)
		}
		slices.Sort(d.Policies)
		d.Policies = slices.Compact(d.Policies)
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Demand) int { return cmp.Compare(a.Set, b.Set) })
	return out
}

// Waiting is how many ADDs wait in all.
func (l *Line) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ws := range l.waiters {
		n += len(ws)
	}
	return n
}

// Poke tells every waiter to look at the pool again (after a round, a release).
func (l *Line) Poke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for set := range l.waiters {
		l.pokeLocked(set)
	}
}

func (l *Line) pokeLocked(set string) {
	for _, w := range l.waiters[set] {
		select {
		case w.poke <- struct{}{}:
		default:
		}
	}
}

// Block says why the set cannot get an address until then (the zero time: until Unblock), and tells its
// waiters.
func (l *Line) Block(set, why string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.blocks == nil {
		l.blocks = map[string]block{}
	}
	l.blocks[set] = block{why: why, until: until}
	l.pokeLocked(set)
}

// Unblock clears a block that holds until cleared; one with an end of its own runs out by itself.
func (l *Line) Unblock(set string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.blocks[set]; ok && b.until.IsZero() {
		delete(l.blocks, set)
	}
}

// Blocked is why the set cannot get an address at now, or "".
func (l *Line) Blocked(set string, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.blocks[set]
	switch {
	case !ok:
		return ""
	case !b.until.IsZero() && !now.Before(b.until):
		delete(l.blocks, set)
		return ""
	}
	return b.why
}

// Blocks lists every set's block in force at now, by key.
func (l *Line) Blocks(now time.Time) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for set, b := range l.blocks {
		if b.until.IsZero() || now.Before(b.until) {
			out[set] = b.why
		}
	}
	return out
}
