package ec2client

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/eniwire/eniwire/internal/clock"
)

// backoff returns the full-jitter delay before retry n (n = 0 after the first failed attempt): uniform in
// [0, min(cap, base*2^n)). Full jitter spreads the retries of many nodes throttled in the same second over the
// whole window, instead of having them return together.
func backoff(base, ceiling time.Duration, n int, rnd func() float64) time.Duration {
	window := ceiling
	if n < 62 {
		if w := base << n; w > 0 && w < ceiling {
			window = w
		}
	}
	return time.Duration(rnd() * float64(window))
}

// StartupJitter waits a uniform random time in [0, max) of clk's time, or until ctx ends, so that a rollout of
// hundreds of nodes does not send its start-up EC2 calls in the same second. It returns ctx's error if ctx
// ended first.
func StartupJitter(ctx context.Context, clk clock.Clock, max time.Duration) error {
	if max <= 0 {
		return ctx.Err()
	}
	return clk.Sleep(ctx, time.Duration(rand.Float64()*float64(max)))
}
