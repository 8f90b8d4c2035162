package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// Strategy is how a node manages its ENIs.
type Strategy string

// Scenario is what the fleet goes through.
type Scenario string

const (
	Eniwire Strategy = "eniwire"
	Legacy  Strategy = "legacy"
	// VPCCNI is a model of the AWS VPC CNI in prefix mode (vpccni.go); it plays only the prefix scenarios.
	VPCCNI Strategy = "vpc-cni"

	Rollout Scenario = "rollout"
	Churn   Scenario = "churn"
	Chaos   Scenario = "chaos"
	// RolloutPrefix starts every node in prefix mode with PodsPerNode pods waiting (prefixscenarios.go).
	RolloutPrefix Scenario = "rollout-prefix"
	// Fragmented is a rollout of prefix-mode nodes into subnets whose single IPs leave no free /28
	// (fragment.go).
	Fragmented Scenario = "fragmented"
	// Exhausted is a pod rollout during which the nodes' subnets run out; discovered pod subnets take over
	// (exhausted.go).
	Exhausted Scenario = "exhausted"
)

// prefixScenario says whether the nodes of sc run in prefix mode and carry pods from the start.
func prefixScenario(sc Scenario) bool { return sc == RolloutPrefix || sc == Fragmented }

// Options shape a run. Zero values take the defaults.
type Options struct {
	// Nodes in the fleet (default 300).
	Nodes int
	// Speedup is virtual seconds per wall second (default DefaultSpeedup(Nodes)): the most, as virtual time
	// slows while the machine cannot keep up with the fleet (pacer.go), unless FixedPace is set.
	Speedup float64
	// FixedPace keeps virtual time at Speedup throughout, however late the fleet's goroutines run (the harness
	// before its pacer; for comparison).
	FixedPace bool
	// Seed makes the simulator and the scenario's choices reproducible (default 1).
	Seed int64
	// Dir holds the nodes' journals (default a fresh directory under /dev/shm, removed after the run).
	Dir string
	// MaxVirtual caps one run in virtual time (default max(3 x lower bound, lower bound + 300 s)).
	MaxVirtual time.Duration
	// ChurnDuration is how long pods come and go and nodes join and leave (default 120 s, virtual).
	ChurnDuration time.Duration
	// EC2Config is the eniwire nodes' EC2 client configuration (zero: the product defaults).
	EC2Config ec2client.Config
	// PodsPerNode is the pods each node of rollout-prefix carries (default 110, kubelet's max pods on the
	// fleet's types in prefix mode). Fragmented gives each node what its ENIs can address with single IPs.
	PodsPerNode int
	// MinimumIPTarget is the eniwire nodes' MINIMUM_IP_TARGET in the prefix scenarios (0: unset, the product's
	// default WARM_PREFIX_TARGET of 1 governs).
	MinimumIPTarget int
	// FragmentedWindow is how long the fragmented scenario runs at least (default 600 s, virtual: five of the
	// AWS VPC CNI's 120 s pauses); 3 x its lower bound when that is longer.
	FragmentedWindow time.Duration
	// Progress receives a progress line now and then (nil: none).
	Progress io.Writer
	// Logger receives the nodes' logs (nil: discarded).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Nodes <= 0 {
		o.Nodes = 300
	}
	if o.Speedup <= 0 {
		o.Speedup = DefaultSpeedup(o.Nodes)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ChurnDuration <= 0 {
		o.ChurnDuration = 120 * time.Second
	}
	if o.FragmentedWindow <= 0 {
		o.FragmentedWindow = 600 * time.Second
	}
	if o.PodsPerNode <= 0 {
		o.PodsPerNode = 110
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// DefaultSpeedup is the most virtual seconds per wall second a fleet of n nodes runs at by default: 20, whatever
// its size. Every node is a real controller with its own goroutines, SDK client and journal; while the machine
// cannot keep up, the pacer slows virtual time (pacer.go), so the speed-up only bounds how fast the quiet
// stretches of a run pass. (Before the pacer a fixed speed-up too high for the machine made timers fire late and
// virtual time jump: 1,000 nodes needed 5 on 2 CPUs, and 300-node runs at 20 under a load of 17–28 from other
// work did not converge.)
func DefaultSpeedup(int) float64 { return 20 }

// slot is one node of the fleet: its instance and the member playing it.
type slot struct {
	inst      ec2sim.Instance
	m         member
	live      bool
	settledAt time.Duration // virtual time of the first settle, -1 until then
}

// fleet is one run: one strategy, one scenario, one fresh simulated account.
type fleet struct {
	opts     Options
	w        *world
	strategy Strategy
	scenario Scenario
	dir      string
	set      nodeSettings
	rng      *rand.Rand
	t0       time.Time

	mu    sync.Mutex
	slots []*slot
	kills int
	pods  podStats
	// base are the simulator's counters before the scenario's nodes started (the fragmenting fill's calls).
	base ec2sim.Counters
	// fill describes the fragmentation of the fragmented scenario.
	fill fillStats
	// filled are the pod rollout's measures (podfill.go).
	filled *podFill
}

type podStats struct {
	started, failed, dups int
}

// Run plays one scenario with one strategy and measures it.
func Run(ctx context.Context, opts Options, strategy Strategy, scenario Scenario) (Result, error) {
	opts.defaults()
	wallStart := time.Now()
	if (strategy == Legacy && (prefixScenario(scenario) || scenario == Exhausted)) || (strategy == VPCCNI && !prefixScenario(scenario)) {
		return Result{}, fmt.Errorf("running %s in %s: the legacy strategy plays rollout, churn and chaos; vpc-cni "+
			"plays rollout-prefix and fragmented; exhausted is eniwire's only", strategy, scenario)
	}
	mix := instanceMix
	if prefixScenario(scenario) {
		mix = prefixMix
	}
	w, err := newWorld(opts.Speedup, opts.FixedPace, opts.Seed, opts.Nodes, mix, scenario == Fragmented)
	if err != nil {
		return Result{}, err
	}
	defer w.close()
	if scenario == Exhausted {
		if err := w.addPodSubnets(); err != nil {
			return Result{}, err
		}
	}
	dir := opts.Dir
	if dir == "" {
		base := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm" // journals fsync on every change; tmpfs keeps a thousand of them cheap
		}
		if dir, err = os.MkdirTemp(base, "eniwire-fleet-"); err != nil {
			return Result{}, fmt.Errorf("making the run directory: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	f := &fleet{opts: opts, w: w, strategy: strategy, scenario: scenario,
		dir: filepath.Join(dir, string(strategy)+"-"+string(scenario)),
		set: nodeSettings{ec2Config: opts.EC2Config, log: opts.Logger},
		rng: rand.New(rand.NewPCG(uint64(opts.Seed), 0xf1ee7))}
	if scenario == Churn {
		f.set.warmENI = 1
		// The churn's pods are asked for in turn, one tick at a time, and its nodes are stopped mid-work: their
		// ADDs answer at once, as before the ADD waited.
		f.set.addWait = -1
	}
	f.set.prefix = prefixScenario(scenario)
	f.set.discovery = scenario == Exhausted
	if f.set.prefix {
		f.set.minimumIP = opts.MinimumIPTarget
	}
	var res Result
	switch scenario {
	case Rollout, Chaos:
		res, err = f.rollout(ctx, scenario == Chaos)
	case Churn:
		res, err = f.churn(ctx)
	case RolloutPrefix, Fragmented, Exhausted:
		res, err = f.podRollout(ctx)
	default:
		return Result{}, fmt.Errorf("running scenario %q: unknown scenario", scenario)
	}
	f.stopAll()
	if err != nil {
		return res, err
	}
	f.measure(&res)
	res.WallSeconds = time.Since(wallStart).Seconds()
	return res, nil
}

func (f *fleet) now() time.Duration { return f.w.clk.Since(f.t0) }

func (f *fleet) newMember(inst ec2sim.Instance) member {
	switch f.strategy {
	case Legacy:
		return newLegacyNode(f.w, inst, f.set)
	case VPCCNI:
		return newVPCCNINode(f.w, inst, f.set)
	}
	return newEniwireNode(f.w, inst, f.dir, f.set)
}

// addNode launches instance i and starts its node.
func (f *fleet) addNode(ctx context.Context, i int) (*slot, error) {
	inst, err := f.w.addInstance(i)
	if err != nil {
		return nil, err
	}
	s := &slot{inst: inst, m: f.newMember(inst), live: true, settledAt: -1}
	if err := s.m.start(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.slots = append(f.slots, s)
	f.mu.Unlock()
	return s, nil
}

func (f *fleet) liveSlots() []*slot {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*slot, 0, len(f.slots))
	for _, s := range f.slots {
		if s.live {
			out = append(out, s)
		}
	}
	return out
}

// markSettled records the first settle of every live node and reports how many have settled and how many
// settle right now.
func (f *fleet) markSettled() (ever, now, live int) {
	t := f.now()
	for _, s := range f.liveSlots() {
		live++
		if s.m.settled() {
			now++
			if s.settledAt < 0 {
				s.settledAt = t
			}
		}
		if s.settledAt >= 0 {
			ever++
		}
	}
	return ever, now, live
}

// waitAllSettled polls until every live node is settled at once, or until the virtual deadline.
func (f *fleet) waitAllSettled(ctx context.Context, until time.Duration, what string) bool {
	last := time.Now()
	for {
		ever, now, live := f.markSettled()
		if now == live {
			return true
		}
		if f.now() >= until || ctx.Err() != nil {
			return false
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			f.progress("%s: %d/%d settled (%d ever)", what, now, live, ever)
		}
		sleepCtx(ctx, f.w.clk, 500*time.Millisecond)
	}
}

func (f *fleet) progress(format string, args ...any) {
	if f.opts.Progress == nil {
		return
	}
	c := f.w.sim.Counters()
	var calls, thr int64
	for _, a := range c {
		calls += a.Calls
		thr += a.Throttled
	}
	fmt.Fprintf(f.opts.Progress, "[%s/%s n=%d] t=%4.0fs %s; ec2 calls %d, throttled %d\n", f.strategy, f.scenario,
		f.opts.Nodes, f.now().Seconds(), fmt.Sprintf(format, args...), calls, thr)
}

func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, s := range f.liveSlots() {
		wg.Add(1)
		go func() { defer wg.Done(); s.m.stop() }()
	}
	wg.Wait()
}

// deadline is the virtual cap of a run with lower bound lb.
func (f *fleet) deadline(lb float64) time.Duration {
	if f.opts.MaxVirtual > 0 {
		return f.opts.MaxVirtual
	}
	d := time.Duration(max(3*lb, lb+300) * float64(time.Second))
	return d
}
