package fleet

import (
	"context"
	"runtime/metrics"
	"sync"
	"time"
)

// The pacer makes the fleet measure the system, not the machine it runs on. Every node of the fleet is a real
// controller with its goroutines, SDK client and journal, and the simulator answers in the same process: their
// work takes wall time, which a fixed speed-up turns into virtual time. On a real fleet each node has CPUs of its
// own and that work takes next to no time; on the 2 cores of a shared machine, while the nodes' goroutines wait
// for a CPU, virtual time ran on without them: timers fired late, ADDs timed out, and a run under load took
// virtual minutes the fleet would not have taken, or did not converge before its deadline.
//
// So the pace of virtual time follows the work outstanding: every paceEvery the pacer reads how many goroutines
// are running and how many are ready to run but wait for a CPU (runtime/metrics), and divides the run's speed-up
// by the goroutines per CPU when they are more than one: with every goroutine on a CPU of its own, as on a real
// fleet, virtual time runs at the speed-up; with 10 sharing each CPU, at a tenth of it; never slower than
// paceFloor. It slows at once and goes back up by at most paceRise per look. The run reports the speed-up it
// reached on average and the slowest pace (Result.SpeedupEffective, SpeedupLeast). The floor is well under the
// wall clock's pace: at 1 the machine's CPU time still passed as virtual time while a 300-node rollout's 33,000
// ADDs started, the first nodes ready saw a part of their pods and grew twice, and the last pod had its IP at
// 73 s instead of 51 s.
const (
	paceEvery = 10 * time.Millisecond
	paceRise  = 1.25
	paceFloor = 0.05
)

// pacer sets its clock's pace by the fleet's goroutines waiting for a CPU.
type pacer struct {
	clk *pacedClock
	top float64

	mu        sync.Mutex
	wall0     time.Time
	virt0     time.Time
	least     float64
	slowWall  time.Duration
	lastLook  time.Time
	lastSlow  bool
	unsupport bool
}

// runnableMetric is the goroutines ready to run and not running, runningMetric those running, gomaxprocsMetric
// the CPUs they share.
const (
	runnableMetric   = "/sched/goroutines/runnable:goroutines"
	runningMetric    = "/sched/goroutines/running:goroutines"
	gomaxprocsMetric = "/sched/gomaxprocs:threads"
)

func newPacer(clk *pacedClock) *pacer {
	now := time.Now()
	return &pacer{clk: clk, top: clk.Factor(), wall0: now, virt0: clk.Now(), least: clk.Factor(), lastLook: now}
}

// run paces the clock until ctx ends.
func (p *pacer) run(ctx context.Context) {
	samples := []metrics.Sample{{Name: runnableMetric}, {Name: runningMetric}, {Name: gomaxprocsMetric}}
	t := time.NewTicker(paceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		if samples[0].Value.Kind() != metrics.KindUint64 {
			p.mu.Lock()
			p.unsupport = true
			p.mu.Unlock()
			return // a runtime that does not count them: the clock keeps its speed-up
		}
		p.look(samples[0].Value.Uint64()+samples[1].Value.Uint64(), samples[2].Value.Uint64())
	}
}

// look sets the pace for busy goroutines (running or ready to run) on procs CPUs.
func (p *pacer) look(busy, procs uint64) {
	target := p.top
	if perCPU := float64(busy) / float64(max(procs, 1)); perCPU > 1 {
		target = max(min(paceFloor, p.top), p.top/perCPU)
	}
	rate := p.clk.Factor()
	switch {
	case target < rate:
		rate = target
	case rate < target:
		rate = min(target, rate*paceRise)
	}
	if rate != p.clk.Factor() {
		p.clk.setPace(rate)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastSlow {
		p.slowWall += now.Sub(p.lastLook)
	}
	p.lastLook, p.lastSlow = now, rate < p.top
	p.least = min(p.least, rate)
}

// paceReport is what the pacer did since it started.
type paceReport struct {
	// Effective is the virtual seconds that passed per wall second; Least the slowest pace; SlowShare the share
	// of the wall time the clock ran below its speed-up.
	Effective, Least, SlowShare float64
	// Unsupported is set when the runtime does not count runnable goroutines: the clock kept its speed-up.
	Unsupported bool
}

func (p *pacer) report() paceReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	wall := time.Since(p.wall0)
	if wall <= 0 {
		return paceReport{Effective: p.top, Least: p.least}
	}
	return paceReport{Effective: float64(p.clk.Since(p.virt0)) / float64(wall), Least: p.least,
		SlowShare: float64(p.slowWall) / float64(wall), Unsupported: p.unsupport}
}
