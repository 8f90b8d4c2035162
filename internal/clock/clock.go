// Package clock lets the controller and the simulator share one notion of time. Production uses Real;
// tests and the fleet simulation use Scaled, which runs a speed-up factor faster than the wall clock, so
// that minutes of EC2 behaviour (bucket refills, attachment delays, backoffs) pass in seconds.
package clock

import (
	"context"
	"time"
)

// Clock is the time source of everything that waits on EC2.
type Clock interface {
	// Now is the current (virtual) time.
	Now() time.Time
	// Since is Now().Sub(t).
	Since(t time.Time) time.Duration
	// After delivers the (virtual) time once d of virtual time has passed.
	After(d time.Duration) <-chan time.Time
	// Sleep waits d of virtual time, or until ctx ends (then it returns ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
	// Factor is how many virtual seconds pass per wall second (1 for Real).
	Factor() float64
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) Since(t time.Time) time.Duration        { return time.Since(t) }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (Real) Factor() float64                        { return 1 }
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	return sleepWall(ctx, d)
}

// Scaled runs factor times faster than the wall clock, starting from the wall time at its creation.
type Scaled struct {
	wallOrigin time.Time
	factor     float64
}

// NewScaled returns a clock whose virtual seconds last 1/factor wall seconds. factor <= 0 means 1.
func NewScaled(factor float64) *Scaled {
	if factor <= 0 {
		factor = 1
	}
	return &Scaled{wallOrigin: time.Now(), factor: factor}
}

func (s *Scaled) Factor() float64 { return s.factor }

func (s *Scaled) Now() time.Time {
	elapsed := time.Since(s.wallOrigin)
	return s.wallOrigin.Add(time.Duration(float64(elapsed) * s.factor))
}

func (s *Scaled) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// Wall converts a virtual duration to the wall duration it takes.
func (s *Scaled) Wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.factor)
}

func (s *Scaled) After(d time.Duration) <-chan time.Time {
	out := make(chan time.Time, 1)
	time.AfterFunc(s.Wall(d), func() { out <- s.Now() })
	return out
}

func (s *Scaled) Sleep(ctx context.Context, d time.Duration) error {
	return sleepWall(ctx, s.Wall(d))
}

func sleepWall(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
