package controller

import (
	"sync"
	"time"
)

// opDrives are the drives of ENI operations in flight, each in its own goroutine, and each operation's retry
// backoff. Who may touch it: any goroutine, under its own lock; Run waits for the drives before it returns.
type opDrives struct {
	mu       sync.Mutex
	driving  map[string]bool
	backoffs map[string]backoff
	group    sync.WaitGroup
}

// backoff is when one ENI operation may be tried again, and the delay that got it there.
type backoff struct {
	until time.Time
	delay time.Duration
}

// start runs drive for opID in the background unless its drive runs already (the steps of one operation
// never run concurrently), and reports whether it started it. Once the drive has ended and another may
// start, moved is called if drive reported that it moved the operation on.
func (d *opDrives) start(opID string, drive func() bool, moved func()) bool {
	d.mu.Lock()
	if d.driving == nil {
		d.driving, d.backoffs = map[string]bool{}, map[string]backoff{}
	}
	if d.driving[opID] {
		d.mu.Unlock()
		return false
	}
	d.driving[opID] = true
	d.mu.Unlock()
	d.group.Go(func() {
		ok := drive()
		d.mu.Lock()
		delete(d.driving, opID)
		d.mu.Unlock()
		if ok {
			moved()
		}
	})
	return true
}

// wait returns once every drive has ended.
func (d *opDrives) wait() { d.group.Wait() }

// waiting reports whether opID waits on its backoff at now.
func (d *opDrives) waiting(opID string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.backoffs[opID]
	return ok && now.Before(b.until)
}

// failed grows opID's backoff within bounds after a failed step at now, and returns the wait and when it ends.
func (d *opDrives) failed(opID string, now time.Time, bounds backoffBounds) (wait time.Duration, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.backoffs == nil {
		d.backoffs = map[string]backoff{}
	}
	b := d.backoffs[opID]
	b.delay, wait = bounds.next(b.delay)
	b.until = now.Add(wait)
	d.backoffs[opID] = b
	return wait, b.until
}

// clear forgets opID's backoff: a step succeeded, or the operation rests.
func (d *opDrives) clear(opID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.backoffs, opID)
}
