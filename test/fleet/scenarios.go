package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// chaos settings: how often a node is killed and a response dropped, and EC2's eventual consistency.
const (
	killEvery       = 5 * time.Second
	killFraction    = 0.02
	restartAfter    = time.Second
	dropEvery       = time.Second
	visibilityDelay = 3 * time.Second
)

// droppable are the calls whose answers chaos drops: EC2 applies them, the client hears nothing.
var droppable = []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
	"AssignPrivateIpAddresses", "DescribeNetworkInterfaces"}

// rollout starts every node at once with WARM_ENI_TARGET = the type's maximum ENIs and waits until every node
// has them all, DeleteOnTermination included. With chaos, nodes are killed and restarted (from their journals),
// answers are dropped and new ENIs stay invisible for a while.
func (f *fleet) rollout(ctx context.Context, chaos bool) (Result, error) {
	res := Result{Strategy: string(f.strategy), Scenario: string(f.scenario), Nodes: f.opts.Nodes}
	insts, err := f.addInstances()
	if err != nil {
		return res, err
	}
	res.LowerBoundSeconds, res.LowerBoundAction, res.CallsNeeded = rolloutLowerBound(f.strategy, insts)
	until := f.deadline(res.LowerBoundSeconds)
	var stopChaos func()
	if chaos {
		f.w.sim.Faults().SetVisibilityDelay(visibilityDelay)
	}
	f.t0 = f.w.clk.Now()
	for _, inst := range insts {
		s := &slot{inst: inst, m: f.newMember(inst), live: true, settledAt: -1}
		if err := s.m.start(ctx); err != nil {
			return res, err
		}
		f.slots = append(f.slots, s)
	}
	if chaos {
		stopChaos = f.startChaos(ctx)
	}
	f.startTrace(ctx)
	all := f.waitEverSettled(ctx, until)
	if stopChaos != nil {
		stopChaos()
		f.w.sim.Faults().Reset()
	}
	res.Converged = all
	res.ConvergeSeconds = -1
	if all {
		res.ConvergeSeconds = f.lastSettle().Seconds()
		// Every node must also hold its target at the end, all at once (a killed node has to come back).
		res.Converged = f.waitAllSettled(ctx, f.now()+120*time.Second, "final check")
	}
	res.VirtualSeconds = f.now().Seconds()
	return res, nil
}

// waitEverSettled polls until every node has settled at least once, or the deadline.
func (f *fleet) waitEverSettled(ctx context.Context, until time.Duration) bool {
	last := time.Now()
	for {
		ever, now, live := f.markSettled()
		if ever == live {
			return true
		}
		if f.now() >= until || ctx.Err() != nil {
			return false
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			f.progress("%d/%d nodes reached their target (%d now)", ever, live, now)
		}
		sleepCtx(ctx, f.w.clk, 500*time.Millisecond)
	}
}

func (f *fleet) lastSettle() time.Duration {
	var last time.Duration
	for _, s := range f.liveSlots() {
		last = max(last, s.settledAt)
	}
	return last
}

// startChaos kills and restarts random nodes and drops random answers until the returned stop is called.
func (f *fleet) startChaos(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for sleepCtx(ctx, f.w.clk, dropEvery) {
			f.mu.Lock()
			action := droppable[f.rng.IntN(len(droppable))]
			f.mu.Unlock()
			f.w.sim.Faults().DropResponses(action, 1)
		}
	}()
	go func() {
		defer wg.Done()
		for sleepCtx(ctx, f.w.clk, killEvery) {
			live := f.liveSlots()
			k := max(1, int(float64(len(live))*killFraction))
			var victims []*slot
			f.mu.Lock()
			for _, i := range f.rng.Perm(len(live))[:min(k, len(live))] {
				victims = append(victims, live[i])
			}
			f.kills += len(victims)
			f.mu.Unlock()
			var kw sync.WaitGroup
			for _, s := range victims {
				kw.Add(1)
				go func() {
					defer kw.Done()
					s.m.stop()
					sleepCtx(context.WithoutCancel(ctx), f.w.clk, restartAfter)
					if err := s.m.start(context.WithoutCancel(ctx)); err != nil {
						f.progress("restarting %s: %v", s.inst.ID, err)
					}
				}()
			}
			kw.Wait()
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// churn warms a fleet with WARM_ENI_TARGET=1, then creates and deletes pods at a steady rate across it while
// nodes join and leave, then deletes the pods and waits for every node to settle.
func (f *fleet) churn(ctx context.Context) (Result, error) {
	res := Result{Strategy: string(f.strategy), Scenario: string(f.scenario), Nodes: f.opts.Nodes}
	f.t0 = f.w.clk.Now()
	next := 0
	for ; next < f.opts.Nodes; next++ {
		if _, err := f.addNode(ctx, next); err != nil {
			return res, err
		}
	}
	warmUntil := f.now() + f.deadline(f.onePerNodeSeconds())
	f.waitAllSettled(ctx, warmUntil, "warm-up")
	d := newPodDriver(f)
	end := f.now() + f.opts.ChurnDuration
	lastLeave := f.now()
	lastProgress := time.Now()
	for f.now() < end && ctx.Err() == nil {
		d.tick(ctx)
		if f.now()-lastLeave >= churnNodeEvery {
			lastLeave = f.now()
			if err := f.replaceNode(ctx, d, next); err != nil {
				return res, err
			}
			next++
		}
		if time.Since(lastProgress) > 2*time.Second {
			lastProgress = time.Now()
			f.progress("churn: %d pods running, %d started, %d failed", len(d.running), d.stats.started, d.stats.failed)
		}
		sleepCtx(ctx, f.w.clk, podTick)
	}
	d.releaseAll(ctx)
	res.Converged = f.waitAllSettled(ctx, f.now()+f.deadline(f.onePerNodeSeconds()), "settling")
	res.ConvergeSeconds = -1
	if res.Converged {
		res.ConvergeSeconds = f.now().Seconds()
	}
	f.pods = d.stats
	res.VirtualSeconds = f.now().Seconds()
	return res, nil
}

// onePerNodeSeconds is the least time AWS's mutating buckets (5 calls/s) need for one call per node: warming
// one ENI per node, or releasing one, cannot be faster, so the waits of churn scale with it (at least 60 s).
func (f *fleet) onePerNodeSeconds() float64 { return max(60, float64(f.opts.Nodes)/5) }

// churnNodeEvery is how often one node leaves and a new one joins during churn.
const churnNodeEvery = 10 * time.Second

// replaceNode terminates a random live node (its pods gone first) and launches a new one.
func (f *fleet) replaceNode(ctx context.Context, d *podDriver, next int) error {
	live := f.liveSlots()
	if len(live) > 1 {
		f.mu.Lock()
		s := live[f.rng.IntN(len(live))]
		f.mu.Unlock()
		d.dropNode(s)
		s.m.stop()
		f.mu.Lock()
		s.live = false
		f.mu.Unlock()
		if err := f.w.sim.TerminateInstance(s.inst.ID); err != nil {
			return fmt.Errorf("terminating %s: %w", s.inst.ID, err)
		}
	}
	_, err := f.addNode(ctx, next)
	return err
}

// addInstances launches the fleet's instances, one per node.
func (f *fleet) addInstances() ([]ec2sim.Instance, error) {
	insts := make([]ec2sim.Instance, 0, f.opts.Nodes)
	for i := range f.opts.Nodes {
		inst, err := f.w.addInstance(i)
		if err != nil {
			return nil, err
		}
		insts = append(insts, inst)
	}
	return insts, nil
}
