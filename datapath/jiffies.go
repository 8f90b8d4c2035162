package datapath

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// jiffiesPerSecond is the kernel's tick rate (CONFIG_HZ), the unit conntrack keeps an entry's timeout in.
// The coarse clocks advance once a tick, and clock_getres reports their resolution as the tick's length
// (TICK_NSEC, 10^9 / HZ rounded), so HZ is 10^9 over it, rounded.
func jiffiesPerSecond() (uint32, error) {
	var res unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &res); err != nil {
		return 0, fmt.Errorf("reading the coarse clock's resolution: %w", err)
	}
	tick := res.Nano()
	if tick <= 0 || tick > 1e9 {
		return 0, fmt.Errorf("the coarse clock's resolution is %d ns, not a tick's length", tick)
	}
	return uint32((1e9 + tick/2) / tick), nil
}
