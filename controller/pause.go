package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/internal/clock"
)

// poolPause is the pool-wide pause: no growth until it ends. A refusal a storm would not fix (refusalPolicy's
// pausesPool) starts a long one, with a status line kept until the pool is calm again; any other failed step
// pauses the round only. Who may touch it: any goroutine (the drives pause the pool too), under its own lock.
type poolPause struct {
	clock   clock.Clock
	counted prometheus.Counter // eniwire_pool_backoffs_total

	mu    sync.Mutex
	until time.Time
	delay time.Duration
	note  string
	// reason names note (api.Pool*).
	reason string
}

// pausedAt reports whether growth waits at now.
func (p *poolPause) pausedAt(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return now.Before(p.until)
}

// pause stops growth for the next delay within bounds, saying why (and its reason, api.Pool*) in the status.
func (p *poolPause) pause(reason, why string, bounds backoffBounds) {
	p.mu.Lock()
	p.delay, _ = bounds.next(p.delay)
	p.until = p.clock.Now().Add(p.delay)
	p.note, p.reason = backingOff(why, p.until), reason
	p.mu.Unlock()
	p.counted.Inc()
}

// roundFailed pauses growth for this round only, after a failure that started no longer pause: a delay that
// grows from half the last one within retryBounds, at most most.
func (p *poolPause) roundFailed(most time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if now.Before(p.until) {
		return
	}
	p.delay, _ = retryBounds.next(p.delay / 2)
	p.until = now.Add(min(p.delay, most))
}

// calm ends the growth of the delay and the status line: the pool meets its targets.
func (p *poolPause) calm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.note, p.reason = 0, "", ""
}

// status is why growth was last paused, until the pool is calm again, or "".
func (p *poolPause) status() string {
	_, s := p.because()
	return s
}

// because is status with its reason.
func (p *poolPause) because() (reason, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reason, p.note
}

// backingOff is a status line: why, and until when the pool waits.
func backingOff(why string, until time.Time) string {
	return why + "; backing off until " + until.UTC().Format(time.RFC3339)
}
