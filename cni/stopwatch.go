package cni

import "time"

// stopwatch times the steps of one command for its log line, so that a slow ADD says where its time went.
type stopwatch struct {
	start, last time.Time
	laps        []any // "<step>_ms", milliseconds, ... as slog attributes
}

func startStopwatch() *stopwatch {
	now := time.Now()
	return &stopwatch{start: now, last: now}
}

// lap records the time since the previous lap (or the start) as step.
func (s *stopwatch) lap(step string) {
	now := time.Now()
	s.laps = append(s.laps, step+"_ms", millis(now.Sub(s.last)))
	s.last = now
}

// attrs are the laps and the total, for a log line.
func (s *stopwatch) attrs() []any {
	return append(s.laps, "total_ms", millis(time.Since(s.start)))
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
