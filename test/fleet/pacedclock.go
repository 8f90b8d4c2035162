package fleet

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// pacedClock is the fleet's virtual clock: it runs a number of virtual seconds per wall second, its pace, which
// the harness lowers while the machine cannot keep up with the fleet and raises again after (pacer.go). Its
// timers wait in virtual time, so a change of pace moves every one of them: a Sleep never ends before its
// virtual duration has passed, nor later than the pace it then runs at makes it. It implements clock.Clock.
type pacedClock struct {
	origin time.Time
	now    atomic.Pointer[pace]
	// latest is the latest virtual time read, as an offset from origin: a reader that took the pace just
	// before a change must not make time run backwards for the next.
	latest atomic.Int64

	mu     sync.Mutex
	timers timerHeap
	wake   *time.Timer // fires at the wall time of the earliest timer
}

// pace is the clock from one change of pace to the next: virtual time virt0 (an offset from the clock's
// origin) at wall time wall0, then rate virtual seconds per wall second.
type pace struct {
	wall0 time.Time
	virt0 time.Duration
	rate  float64
}

func (p *pace) at(wall time.Time) time.Duration {
	return p.virt0 + time.Duration(float64(wall.Sub(p.wall0))*p.rate)
}

// newPacedClock starts at the wall time, running rate times faster (rate <= 0 means 1).
func newPacedClock(rate float64) *pacedClock {
	if rate <= 0 {
		rate = 1
	}
	t := time.Now()
	c := &pacedClock{origin: t}
	c.now.Store(&pace{wall0: t, rate: rate})
	return c
}

func (c *pacedClock) Now() time.Time { return c.origin.Add(c.offset()) }

// offset is the virtual time now, from the origin; it never goes back.
func (c *pacedClock) offset() time.Duration {
	v := int64(c.now.Load().at(time.Now()))
	for {
		last := c.latest.Load()
		if v <= last {
			return time.Duration(last)
		}
		if c.latest.CompareAndSwap(last, v) {
			return time.Duration(v)
		}
	}
}

func (c *pacedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Factor is the pace now.
func (c *pacedClock) Factor() float64 { return c.now.Load().rate }

// setPace makes virtual time run rate times faster than the wall clock from now on; the timers follow.
func (c *pacedClock) setPace(rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall := time.Now()
	c.now.Store(&pace{wall0: wall, virt0: max(c.now.Load().at(wall), time.Duration(c.latest.Load())), rate: rate})
	c.rearmLocked()
}

// After delivers the virtual time once d of it has passed.
func (c *pacedClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	now := c.Now()
	if d <= 0 {
		ch <- now
		return ch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	heap.Push(&c.timers, virtualTimer{at: now.Add(d), ch: ch})
	if c.timers[0].ch == ch {
		c.rearmLocked()
	}
	return ch
}

// Sleep waits d of virtual time, or until ctx ends (then it returns ctx.Err()).
func (c *pacedClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-c.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rearmLocked sets the wall timer to the earliest virtual timer at the pace now.
func (c *pacedClock) rearmLocked() {
	if len(c.timers) == 0 {
		if c.wake != nil {
			c.wake.Stop()
		}
		return
	}
	p := c.now.Load()
	wall := time.Duration(float64(c.timers[0].at.Sub(c.Now())) / p.rate)
	wall = max(wall, 0) + time.Microsecond // never before the virtual deadline, for the rounding
	if c.wake == nil {
		c.wake = time.AfterFunc(wall, c.fire)
		return
	}
	c.wake.Reset(wall)
}

// fire delivers every timer due and sets the wall timer to the next.
func (c *pacedClock) fire() {
	c.mu.Lock()
	now := c.Now()
	var due []chan time.Time
	for len(c.timers) > 0 && !c.timers[0].at.After(now) {
		due = append(due, heap.Pop(&c.timers).(virtualTimer).ch)
	}
	c.rearmLocked()
	c.mu.Unlock()
	for _, ch := range due {
		ch <- now // buffered, and each timer fires once
	}
}

// virtualTimer is one After: its virtual deadline and its channel.
type virtualTimer struct {
	at time.Time
	ch chan time.Time
}

// timerHeap orders the timers by deadline (container/heap).
type timerHeap []virtualTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(virtualTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = virtualTimer{}
	*h = old[:len(old)-1]
	return t
}
