package controller

import (
	"sync"
	"time"
)

// recentNoIP is how long an ADD answered "no IP" still counts as a pod waiting for one: kubelet retries its
// sandbox within seconds, and the pool grows for it meanwhile.
const recentNoIP = 10 * time.Second

// addLine is the line of ADDs waiting for an IP while the pool refills: first come, first served. Only the
// ADD at its head may take a free IP; whoever leaves the head pokes the next one, and the Run loop pokes the
// head after each round (ipsMayHaveLanded). It also remembers the ADDs answered "no IP" lately: with the
// waiters, the pods the pool grows for (demand). Who may touch it: any goroutine, under its own lock, which
// is taken after the books' when both are held.
type addLine struct {
	mu      sync.Mutex
	waiters []*addWaiter
	// arriving are the ADDs on their way to the line: waiting for the books' lock, which a slow journal
	// write or a pool round may hold for long while a burst of ADDs piles up behind it. They are pods
	// waiting for an IP too: left out, the pool saw no demand and gave back as surplus the IPs they came for.
	arriving int
	noIP     []time.Time // when ADDs were answered "no IP", oldest first
}

// arrive counts an ADD on its way to the line; arrived, once it holds the books' lock (it then takes an IP
// or joins the line before the pool can look again).
func (l *addLine) arrive() {
	l.mu.Lock()
	l.arriving++
	l.mu.Unlock()
}

func (l *addLine) arrived() {
	l.mu.Lock()
	l.arriving--
	l.mu.Unlock()
}

// addWaiter is one waiting ADD; poke tells it to look at the pool again.
type addWaiter struct{ poke chan struct{} }

// behind reports whether an ADD (w, or a newcomer when w is nil) must let another go first.
func (l *addLine) behind(w *addWaiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters) > 0 && l.waiters[0] != w
}

// join puts a new waiter at the end of the line.
func (l *addLine) join() *addWaiter {
	w := &addWaiter{poke: make(chan struct{}, 1)}
	l.mu.Lock()
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()
	return w
}

// leave takes w (nil: nobody) out of the line and pokes the one now at its head, which may take what w
// left or must learn what w learned.
func (l *addLine) leave(w *addWaiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.waiters {
		if o == w {
			l.waiters = append(l.waiters[:i:i], l.waiters[i+1:]...)
			break
		}
	}
	l.pokeFirstLocked()
}

// pokeFirst tells the ADD at the head of the line to look at the pool again.
func (l *addLine) pokeFirst() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pokeFirstLocked()
}

func (l *addLine) pokeFirstLocked() {
	if len(l.waiters) == 0 {
		return
	}
	select {
	case l.waiters[0].poke <- struct{}{}:
	default:
	}
}

// waiting is the number of ADDs in line or on their way to it.
func (l *addLine) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters) + l.arriving
}

// answeredNoIP remembers that an ADD was answered "no IP" at now.
func (l *addLine) answeredNoIP(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetLocked(now)
	l.noIP = append(l.noIP, now)
}

// demand is the pods waiting for an IP at now: the ADDs in line or on their way to it, and those answered
// "no IP" within recentNoIP.
func (l *addLine) demand(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetLocked(now)
	return len(l.waiters) + l.arriving + len(l.noIP)
}

func (l *addLine) forgetLocked(now time.Time) {
	i := 0
	for i < len(l.noIP) && now.Sub(l.noIP[i]) >= recentNoIP {
		i++
	}
	l.noIP = l.noIP[i:]
}
