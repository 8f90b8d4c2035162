package fleet

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestATimerOfThePacedClockFollowsAChangeOfPace: a timer set at one pace neither fires before its virtual time
// when the clock slows, nor waits out the slow pace's wall time when the clock speeds up again.
func TestATimerOfThePacedClockFollowsAChangeOfPace(t *testing.T) {
	c := newPacedClock(100)
	start := c.Now()
	fired := c.After(500 * time.Millisecond) // 5 ms of wall time at 100
	c.setPace(1)                             // now 500 ms of wall time
	select {
	case at := <-fired:
		t.Fatalf("the timer fired after %s of virtual time, before its 500ms, when the clock slowed", at.Sub(start))
	case <-time.After(100 * time.Millisecond):
	}
	c.setPace(1000)
	select {
	case at := <-fired:
		if d := at.Sub(start); d < 500*time.Millisecond {
			t.Fatalf("the timer fired after %s of virtual time; want at least 500ms", d)
		}
	case <-time.After(200 * time.Millisecond):
		t.Fatalf("the timer had not fired 200ms of wall time after the clock ran 1000 x faster (virtual time %s)", c.Since(start))
	}
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil { // 2 ms at 1000
		t.Fatal(err)
	}
	if d := c.Since(start); d < 2500*time.Millisecond {
		t.Fatalf("Sleep(2s) returned at %s of virtual time; want at least 2.5s", d)
	}
}

// TestThePacedClockNeverRunsBackwards: readers racing with changes of pace see virtual time go forward only.
func TestThePacedClockNeverRunsBackwards(t *testing.T) {
	c := newPacedClock(50)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.setPace([]float64{50, 1, 20, 3}[i%4])
			time.Sleep(50 * time.Microsecond)
		}
	})
	errs := make(chan time.Duration, 4)
	for range 4 {
		wg.Go(func() {
			last := c.Now()
			for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
				now := c.Now()
				if now.Before(last) {
					errs <- last.Sub(now)
					return
				}
				last = now
			}
		})
	}
	time.Sleep(250 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for back := range errs {
		t.Errorf("virtual time went back by %s across a change of pace", back)
	}
}
