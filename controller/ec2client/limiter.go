package ec2client

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/eniwire/eniwire/internal/clock"
)

// limiter is the client-side token bucket of one EC2 action. x/time/rate does the token arithmetic (always at
// an explicit clock.Now(), so it runs on virtual time too); the limiter adds what rate.Limiter lacks: waiters
// served by priority rather than by arrival, and AIMD, a multiplicative cut of the rate on each throttle and an
// additive recovery on each success, plus a recovery over time once EC2 has stopped throttling: a rate cut to
// the floor would otherwise wait a long time for the successes that restore it, and the last nodes of a rollout
// would crawl while the account's bucket sits full.
type limiter struct {
	clk        clock.Clock
	configured float64 // the rate the operator asked for; recovery never goes above it
	floor      float64 // the lowest rate a run of throttles may cut to
	decrease   float64
	step       float64
	quiet      time.Duration                // no throttle for this long: the rate starts to grow back over time
	doubling   time.Duration                // while growing back over time, the rate doubles every doubling
	onRate     func(rate float64, cut bool) // reports every AIMD change of the rate (metrics, logs)

	mu      sync.Mutex
	lim     *rate.Limiter
	current float64
	// lastCut is the last throttle; grown is when the time-based recovery was last applied.
	lastCut time.Time
	grown   time.Time
	queues  [2][]*waiter // indexed by Priority; Urgent is served first
	armedAt time.Time    // when the pending wake-up fires; zero when none is pending
}

type waiter struct {
	ready   chan struct{}
	granted bool
}

func newLimiter(clk clock.Clock, b Bucket, cfg Config, onRate func(float64, bool)) *limiter {
	l := &limiter{
		clk:        clk,
		configured: b.RatePerSec,
		floor:      b.RatePerSec * cfg.MinRateFraction,
		decrease:   cfg.DecreaseFactor,
		step:       b.RatePerSec * cfg.RecoveryFraction,
		quiet:      cfg.RecoveryQuiet,
		doubling:   cfg.RecoveryDoubling,
		onRate:     onRate,
		lim:        rate.NewLimiter(rate.Limit(b.RatePerSec), b.Burst),
		current:    b.RatePerSec,
	}
	// rate.NewLimiter starts full at the zero time; anchor it at the clock's now so that the first refill is
	// measured on the same (possibly virtual) timeline as every later one.
	l.lim.SetBurstAt(clk.Now(), b.Burst)
	return l
}

// wait blocks until a token is granted to the caller at priority p, or ctx ends.
func (l *limiter) wait(ctx context.Context, p Priority) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	now := l.clk.Now()
	l.recoverLocked(now)
	// A caller may take a token at once only if nobody it must let pass is already waiting.
	ahead := len(l.queues[Urgent]) > 0 || (p == Housekeeping && len(l.queues[Housekeeping]) > 0)
	if !ahead && l.lim.TokensAt(now) >= 1 {
		l.lim.ReserveN(now, 1)
		l.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.queues[p] = append(l.queues[p], w)
	l.dispatchLocked(now)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		now := l.clk.Now()
		if w.granted {
			// Granted in the same instant the caller gave up: hand the token to the next waiter rather than
			// lose it (rate.Limiter cannot take back a reservation that already took effect).
			if next := l.popLocked(); next != nil {
				next.granted = true
				close(next.ready)
			}
		} else {
			l.remove(p, w)
		}
		l.dispatchLocked(now)
		return ctx.Err()
	}
}

func (l *limiter) remove(p Priority, w *waiter) {
	q := l.queues[p]
	for i := range q {
		if q[i] == w {
			l.queues[p] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
}

// dispatchLocked grants the available tokens to the head waiters, urgent first, and arms a wake-up for the
// moment the next token accrues if anyone is still waiting.
func (l *limiter) dispatchLocked(now time.Time) {
	if len(l.queues[Urgent])+len(l.queues[Housekeeping]) > 0 {
		l.recoverLocked(now)
	}
	for len(l.queues[Urgent])+len(l.queues[Housekeeping]) > 0 {
		tokens := l.lim.TokensAt(now)
		if tokens < 1 {
			d := time.Duration((1 - tokens) / l.current * float64(time.Second))
			if l.current < l.configured {
				// The rate will grow while we wait: look again when it has doubled (or when growth starts).
				d = min(d, max(l.lastCut.Add(l.quiet).Sub(now), l.doubling))
			}
			l.armLocked(now, d)
			return
		}
		w := l.popLocked()
		l.lim.ReserveN(now, 1)
		w.granted = true
		close(w.ready)
	}
}

// popLocked removes and returns the waiter to serve next (the oldest urgent one, else the oldest
// housekeeping one), or nil.
func (l *limiter) popLocked() *waiter {
	for _, p := range []Priority{Urgent, Housekeeping} {
		if q := l.queues[p]; len(q) > 0 {
			l.queues[p] = q[1:]
			return q[0]
		}
	}
	return nil
}

// armLocked makes sure a wake-up fires no later than now+d. An earlier pending wake-up is kept; a later one is
// superseded (it still fires, finds nothing new and goes away).
func (l *limiter) armLocked(now time.Time, d time.Duration) {
	// Rounding in the token arithmetic (and the virtual-to-wall conversion) can leave a hair short of a whole
	// token at the computed instant; a small floor keeps the wake-ups from spinning.
	d = max(d, time.Millisecond)
	at := now.Add(d)
	if !l.armedAt.IsZero() && !at.Before(l.armedAt) {
		return
	}
	l.armedAt = at
	ch := l.clk.After(d)
	go func() {
		<-ch
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.armedAt.Equal(at) {
			l.armedAt = time.Time{}
		}
		l.dispatchLocked(l.clk.Now())
	}()
}

// throttled cuts the local rate multiplicatively and empties the bucket: EC2 just said the account's bucket is
// dry, so the tokens saved up locally are worth nothing and spending them would only earn more throttles.
func (l *limiter) throttled() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	l.recoverLocked(now)
	prev := l.current
	l.current = max(l.floor, l.current*l.decrease)
	l.lastCut = now
	l.lim.SetLimitAt(now, rate.Limit(l.current))
	if tokens := l.lim.TokensAt(now); tokens >= 1 {
		l.lim.ReserveN(now, int(tokens))
	}
	// At the floor a further throttle changes nothing worth reporting.
	if l.onRate != nil && l.current != prev {
		l.onRate(l.current, true)
	}
}

// succeeded moves the local rate one step back toward the configured rate.
func (l *limiter) succeeded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current >= l.configured {
		return
	}
	now := l.clk.Now()
	l.recoverLocked(now)
	if l.current >= l.configured {
		return
	}
	l.current = min(l.configured, l.current+l.step)
	l.lim.SetLimitAt(now, rate.Limit(l.current))
	if l.onRate != nil {
		l.onRate(l.current, false)
	}
	// A faster rate may bring the next grant forward.
	l.armedAt = time.Time{}
	l.dispatchLocked(now)
}

// recoverLocked applies the recovery over time: once no throttle has come for the quiet period, a cut rate grows
// exponentially (doubling every l.doubling) back to the configured rate. Exponential, so that a rate at the
// floor is whole again in seconds once the account has room; only after the quiet period, so that under steady
// throttling the cut holds. (Waiting also for a success after the last throttle was measured: the tail of a
// 100-node rollout grew from 1.1 to 1.4 x its lower bound, each last node first spending a call at the floor.)
func (l *limiter) recoverLocked(now time.Time) {
	if l.current >= l.configured || l.doubling <= 0 {
		return
	}
	start := l.lastCut.Add(l.quiet)
	if l.grown.After(start) {
		start = l.grown
	}
	if !now.After(start) {
		return
	}
	l.grown = now
	f := math.Exp2(now.Sub(start).Seconds() / l.doubling.Seconds())
	l.current = min(l.configured, l.current*f)
	l.lim.SetLimitAt(now, rate.Limit(l.current))
	if l.onRate != nil && l.current >= l.configured {
		l.onRate(l.current, false)
	}
}

// lastThrottle returns the time of the last throttle, zero if none.
func (l *limiter) lastThrottle() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastCut
}

// rate returns the current local rate in tokens per second.
func (l *limiter) rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recoverLocked(l.clk.Now())
	return l.current
}
