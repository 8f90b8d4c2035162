package ec2client

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/internal/clock"
)

// Client is the one wrapper over EC2: every call waits for a token of its action's client-side bucket (urgent
// calls first), is counted and timed, and is retried with full-jitter backoff while EC2 throttles it, each
// throttle also cutting the action's local rate. It implements EC2API, so callers hold an EC2API and never know.
//
// Errors: the SDK's, unchanged, for everything but the two cases the wrapper handles itself. A denied call
// returns an *UnauthorizedError (errors.Is(err, ErrUnauthorized)), never retried. A call still throttled after
// Config.MaxAttempts (after one attempt for a context of WithOwnSchedule), or whose context ends while it waits, returns an error for which IsThrottle holds when
// EC2's last answer was a throttle, and errors.Is(err, ctx.Err()) when the context ended.
type Client struct {
	api     EC2API
	cfg     Config
	clk     clock.Clock
	rnd     func() float64
	metrics *metrics
	log     *slog.Logger

	mu       sync.Mutex
	limiters map[string]*limiter
}

var _ EC2API = (*Client)(nil)

// New wraps api. Metrics are registered on reg (nil: kept but not registered); log nil means slog.Default().
func New(api EC2API, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Client, error) {
	cfg = cfg.withDefaults()
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering EC2 metrics: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		api:      api,
		cfg:      cfg,
		clk:      cfg.Clock,
		rnd:      cfg.Rand,
		metrics:  m,
		log:      log.With("component", "ec2client"),
		limiters: map[string]*limiter{},
	}
	if c.rnd == nil {
		c.rnd = rand.Float64
	}
	// Create the known buckets now so that their rates are visible before the first call.
	for action := range DefaultBuckets() {
		c.limiter(action)
	}
	for action := range cfg.Buckets {
		c.limiter(action)
	}
	// Every action's throttle counter starts at 0, so that an alert's rate() counts the first throttles too.
	for bucket := range DefaultBuckets() {
		action, _, _ := strings.Cut(bucket, "/")
		m.throttled.WithLabelValues(action)
	}
	return c, nil
}

// Rate returns the current local rate of action's bucket (calls per second), after any AIMD cut.
func (c *Client) Rate(action string) float64 { return c.limiter(action).rate() }

// LastThrottle returns when EC2 last throttled action (bucket name as in Config.Buckets), the zero time if
// never. Housekeeping reads it to yield to calls that unblock pods while the account's bucket runs dry.
func (c *Client) LastThrottle(action string) time.Time { return c.limiter(action).lastThrottle() }

func (c *Client) limiter(action string) *limiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.limiters[action]; ok {
		return l
	}
	b := c.cfg.bucketFor(action)
	gauge := c.metrics.rate.WithLabelValues(action)
	gauge.Set(b.RatePerSec)
	l := newLimiter(c.clk, b, c.cfg, func(r float64, cut bool) {
		gauge.Set(r)
		switch {
		case cut:
			c.log.Warn("EC2 throttled the node; cutting the local rate", "action", action, "ratePerSec", r)
		case r >= b.RatePerSec:
			// Only the return to full speed is a state change worth a line; the steps on the way are not.
			c.log.Info("EC2 local rate recovered", "action", action, "ratePerSec", r)
		}
	})
	c.limiters[action] = l
	return l
}

// timeout is the wall-clock deadline of one attempt of action. Config.Timeouts is in the clock's time, but a
// request's latency is the machine's: on a scaled clock the deadline is never under a wall second (nor under
// the configured value when that is smaller), so a loaded test machine does not time out calls that answer.
func (c *Client) timeout(action string) time.Duration {
	d := c.cfg.timeoutFor(action)
	return max(time.Duration(float64(d)/c.clk.Factor()), min(d, time.Second))
}

// call runs one EC2 call under the action's limiter, retrying throttles.
// bucket names the limiter (usually the action; see bucketKey), action the metrics.
func call[T any](ctx context.Context, c *Client, action, bucket string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	lim := c.limiter(bucket)
	prio := PriorityFrom(ctx)
	var last error
	for attempt := 1; ; attempt++ {
		waitStart := c.clk.Now()
		if err := lim.wait(ctx, prio); err != nil {
			if last != nil {
				return zero, fmt.Errorf("waiting to retry %s: %w (last answer: %w)", action, err, last)
			}
			return zero, fmt.Errorf("waiting for a %s token: %w", action, err)
		}
		c.metrics.wait.WithLabelValues(action, prio.String()).Observe(c.clk.Since(waitStart).Seconds())

		start := c.clk.Now()
		actx, cancel := context.WithTimeout(ctx, c.timeout(action))
		out, err := fn(actx)
		cancel()
		c.metrics.observe(action, err, c.clk.Since(start))
		switch {
		case err == nil:
			lim.succeeded()
			return out, nil
		case isUnauthorized(err):
			c.log.Error("EC2 denied a call; check the node's IAM policy", "action", action, "code", ErrorCode(err))
			return zero, &UnauthorizedError{Action: action, Err: err}
		case !IsThrottle(err):
			return zero, err
		}
		lim.throttled()
		last = err
		if ownSchedule(ctx) {
			return zero, fmt.Errorf("calling %s: throttled (the caller retries on its own schedule): %w", action, err)
		}
		if attempt >= c.cfg.MaxAttempts {
			return zero, fmt.Errorf("calling %s: still throttled after %d attempts: %w", action, attempt, err)
		}
		delay := backoff(c.cfg.BackoffBase, c.cfg.BackoffCap, attempt-1, c.rnd)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Duration(float64(delay)/c.clk.Factor()) {
			// Sleeping past the deadline would only postpone the same failure.
			return zero, fmt.Errorf("retrying %s: %w before the next attempt (last answer: %w)", action, context.DeadlineExceeded, err)
		}
		if serr := c.clk.Sleep(ctx, delay); serr != nil {
			return zero, fmt.Errorf("waiting to retry %s: %w (last answer: %w)", action, serr, err)
		}
	}
}
