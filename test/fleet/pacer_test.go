package fleet

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// hogCPUs keeps n goroutines busy until the returned stop is called: the machine's other work, in-process.
func hogCPUs(n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, n)
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				for t := time.Now(); time.Since(t) < time.Millisecond; {
				}
			}
		}()
	}
	return func() {
		cancel()
		for range n {
			<-done
		}
	}
}

// TestThePacerSlowsVirtualTimeWhileGoroutinesWaitForACPU: with four goroutines busy per CPU virtual time runs
// well below the speed-up, and back at it once they are done.
func TestThePacerSlowsVirtualTimeWhileGoroutinesWaitForACPU(t *testing.T) {
	const top = 50
	clk := newPacedClock(top)
	p := newPacer(clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.run(ctx)

	stop := hogCPUs(4 * runtime.GOMAXPROCS(0))
	time.Sleep(50 * time.Millisecond) // the pacer's first looks
	v0, w0 := clk.Now(), time.Now()
	time.Sleep(300 * time.Millisecond)
	busy := float64(clk.Since(v0)) / float64(time.Since(w0))
	stop()
	t.Logf("with 4 busy goroutines per CPU: %.1f virtual seconds per wall second (speed-up %d)", busy, top)
	if busy > top/2 {
		t.Errorf("virtual time ran at %.1f x the wall clock while 4 goroutines per CPU waited; want under %d", busy, top/2)
	}
	deadline := time.Now().Add(2 * time.Second)
	for clk.Factor() < top && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f := clk.Factor(); f < top {
		t.Errorf("the pace stayed at %.1f after the busy goroutines ended; want back at %d", f, top)
	}
	if r := p.report(); r.Least >= top || r.SlowShare <= 0 || r.Effective >= top {
		t.Errorf("report %+v; want a least pace, a slow share and an average below %d", r, top)
	}
}

// TestAFleetOnABusyMachineIsMeasuredAtItsOwnPace: 20 nodes' 2,200 pods are all addressed within a few virtual
// seconds whether or not the machine has other work; at a fixed pace, with two busy goroutines per CPU, virtual
// time ran on while the nodes waited for a CPU and the same run took 63 virtual seconds, 2,596 ADDs timing out.
func TestAFleetOnABusyMachineIsMeasuredAtItsOwnPace(t *testing.T) {
	stop := hogCPUs(2 * runtime.GOMAXPROCS(0))
	defer stop()
	r, err := Run(context.Background(), Options{Nodes: 20, Speedup: 20, Seed: 3, Dir: t.TempDir()}, Eniwire, RolloutPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d pods addressed at %.1fs (bound %.0fs), %d ADDs answered no IP; virtual time at %.1f x on average, %.1f x at the slowest, %.1fs of wall time",
		r.PodsWanted, r.ConvergeSeconds, r.LowerBoundSeconds, r.AddsNoIP, r.SpeedupEffective, r.SpeedupLeast, r.WallSeconds)
	if !r.Converged || r.ConvergeSeconds > 15 {
		t.Errorf("pods addressed at %.1fs (converged %v); want within 15 virtual seconds: the start jitter (2 s), a reconcile, an ENI's create and attach (1 s)",
			r.ConvergeSeconds, r.Converged)
	}
	if r.SpeedupLeast >= r.Speedup {
		t.Errorf("virtual time never slowed (least pace %.1f) on a busy machine", r.SpeedupLeast)
	}
}
