// Package controller is the node's IPAM controller: it holds the journaled books, answers pod assignments from
// the warm pool, and runs the pool manager that drives the ENI commit and the reconciler. It is built in-process
// with New, so a fleet simulation can run hundreds of them against one simulator on a scaled clock.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/clock"
)

// Node is one node's controller.
type Node struct {
	cfg     Config
	info    NodeInfo
	clock   clock.Clock
	log     *slog.Logger
	dp      dptypes.Driver
	store   *journal.Store
	journal Journal
	eni     *eni.Manager
	targets pool.Targets
	limits  pool.Limits
	metrics *metrics
	urgent  func(context.Context) context.Context
	// throttles tells when EC2 last throttled an action; nil when the EC2 client does not say.
	throttles throttleReporter

	mu sync.Mutex
	st *journal.State
	// seq is the newest journal record written (under mu): a repeated request waits for its commit.
	seq uint64

	wake      chan struct{}
	answered  atomic.Bool
	poolMu    sync.Mutex
	poolState string
	// backoffMu guards backoffs and the pool-wide backoff: concurrent ENI commits of one round share them.
	backoffMu sync.Mutex
	// backoffs is when each ENI operation may be tried again; poolUntil is the pool-wide backoff.
	backoffs     map[string]backoff
	poolUntil    time.Time
	poolDelay    time.Duration
	surplusSince time.Time
	// lastRecon and nextRecon bound the periodic reconcile; reconcileEvery is its interval now, stretched
	// while the account throttles describes (see reconcile.go).
	lastRecon      time.Time
	nextRecon      time.Time
	reconcileEvery time.Duration
	nextSweep      time.Time
	enisUp         map[string]dptypes.ENI
	// agentRemovesVeth: the datapath removes released pods' host veths, so the plugin's DEL need not.
	agentRemovesVeth bool
}

type backoff struct {
	until time.Time
	delay time.Duration
}

// New opens the journal in cfg.StateDir, replays it into the books and returns the controller; Run starts it.
// A journal of an unknown version or one that cannot be read is an error (journal.ErrUnknownVersion,
// journal.ErrUnreadable) and the file is left untouched.
func New(cfg Config, deps Deps) (*Node, error) {
	cfg.defaults()
	if deps.EC2 == nil || deps.Node.InstanceID == "" {
		return nil, errors.New("building node controller: EC2 client and instance id are required")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Datapath == nil {
		deps.Datapath = dptypes.NoDriver{}
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	log := deps.Logger.With("instance", deps.Node.InstanceID)
	store, st, err := journal.OpenWith(cfg.StateDir, log, journal.Options{Sync: cfg.JournalSync, BatchInterval: cfg.JournalBatchInterval})
	if err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	if st.InstanceID != "" && st.InstanceID != deps.Node.InstanceID {
		store.Close()
		return nil, fmt.Errorf("opening journal: it belongs to instance %s, not %s", st.InstanceID, deps.Node.InstanceID)
	}
	st.InstanceID = deps.Node.InstanceID
	var j Journal = store
	if deps.WrapJournal != nil {
		j = deps.WrapJournal(store)
	}
	n := &Node{
		cfg: cfg, info: deps.Node, clock: deps.Clock, log: log, dp: deps.Datapath, store: store, journal: j, st: st,
		targets: pool.Targets{WarmENI: cfg.WarmENITarget, WarmIP: cfg.WarmIPTarget, MinimumIP: cfg.MinimumIPTarget,
			MaxENI: cfg.MaxENI, MaxPods: cfg.MaxPods},
		limits:   pool.Limits{MaxENIs: deps.Node.MaxENIs, IPsPerENI: max(deps.Node.IPv4PerENI-1, 0)},
		wake:     make(chan struct{}, 1),
		backoffs: map[string]backoff{},
		enisUp:   map[string]dptypes.ENI{},
		urgent:   deps.Urgent,
	}
	n.reconcileEvery = cfg.ReconcileInterval
	if r, ok := deps.Datapath.(interface{ RemovesHostVeth() bool }); ok {
		n.agentRemovesVeth = r.RemovesHostVeth()
	}
	n.throttles, _ = deps.EC2.(throttleReporter)
	n.eni = eni.NewManager(eni.Config{
		InstanceID: deps.Node.InstanceID, Cluster: cfg.Cluster, SubnetID: deps.Node.SubnetID,
		SubnetCIDR: deps.Node.SubnetCIDR, SecurityGroups: deps.Node.SecurityGroups, MaxENIs: deps.Node.MaxENIs,
		GCGrace: cfg.GCGrace,
	}, deps.EC2, deps.IMDS, n, deps.Clock, log)
	m, err := newMetrics(deps.Registerer, n)
	if err != nil {
		store.Close()
		return nil, err
	}
	n.metrics = m
	log.Info("journal replayed", "enis", len(st.ENIs), "assignments", len(st.Assignments), "seq", st.Seq, "recovered", store.Recovered)
	return n, nil
}

// Close closes the journal. Call it after Run has returned.
func (n *Node) Close() error { return n.store.Close() }

// Update implements eni.Books: fn changes the state and the result is durable (fsync'd, whatever the sync
// policy) before Update returns, since the ENI commit makes its EC2 call next. The books' lock is released
// during the fsync, so concurrent commits share one.
func (n *Node) Update(ctx context.Context, fn func(st *journal.State) error) error {
	n.mu.Lock()
	seq, err := n.appendLocked(fn)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	return n.commit(seq, journal.Durable)
}

// appendLocked applies fn and writes the change to the journal (n.mu held). When fn or the write fails the
// state is as before. The change is visible to other holders of the lock from here on, though under the
// Committer path not yet durable: readers may act on it only in ways that a lost change cannot make wrong
// (answering a pod waits for its own commit; an EC2 call follows only a commit of its own).
func (n *Node) appendLocked(fn func(st *journal.State) error) (uint64, error) {
	before := n.st.Clone()
	if err := fn(n.st); err != nil {
		*n.st = *before
		return 0, err
	}
	if c, ok := n.journal.(Committer); ok {
		seq, err := c.Append(n.st)
		if err != nil {
			*n.st = *before
			return 0, fmt.Errorf("writing journal: %w", err)
		}
		n.seq = max(n.seq, seq)
		return seq, nil
	}
	if err := n.journal.Save(n.st); err != nil {
		*n.st = *before
		return 0, fmt.Errorf("saving journal: %w", err)
	}
	return 0, nil
}

// commit waits until record seq is as durable as d asks (seq 0: already saved durably).
func (n *Node) commit(seq uint64, d journal.Durability) error {
	c, ok := n.journal.(Committer)
	if !ok || seq == 0 {
		return nil
	}
	if err := c.Commit(seq, d); err != nil {
		return fmt.Errorf("committing journal: %w", err)
	}
	return nil
}

// View implements eni.Books.
func (n *Node) View(fn func(st *journal.State)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fn(n.st)
}

// Snapshot returns a copy of the books.
func (n *Node) Snapshot() *journal.State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st.Clone()
}

// Ready reports whether the journal is replayed and EC2 has answered the pool once; why not, if not.
func (n *Node) Ready() (bool, string) {
	if !n.answered.Load() {
		return false, "waiting for the first answer from EC2"
	}
	return true, ""
}

// Wake asks the pool manager to look at the pool now.
func (n *Node) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Node) setPoolState(s string) {
	n.poolMu.Lock()
	changed := n.poolState != s
	n.poolState = s
	n.poolMu.Unlock()
	if changed && s != "" {
		n.log.Warn("pool status", "status", s)
	}
}

// Run restores the datapath from the books, then runs the pool manager until ctx ends.
func (n *Node) Run(ctx context.Context) error {
	n.restoreDatapath(ctx)
	if j := n.cfg.StartJitter; j > 0 {
		if err := n.clock.Sleep(ctx, time.Duration(rand.Int64N(int64(j)))); err != nil {
			return nil
		}
	}
	for {
		n.tick(ctx)
		wait := n.cfg.PoolInterval
		select {
		case <-ctx.Done():
			return nil
		case <-n.wake:
		case <-n.clock.After(wait):
		}
	}
}

// tick is one round of the pool manager: reconcile when due, settle unfinished operations, then move the pool
// toward its targets.
func (n *Node) tick(ctx context.Context) {
	now := n.clock.Now()
	if n.nextRecon.IsZero() || !now.Before(n.nextRecon) || n.eni.NeedsReconcile() {
		n.reconcile(ctx)
	}
	// Nothing moves before EC2 has been read once: the pool's arithmetic counts the primary ENI and whatever a
	// previous run attached, which only a reconcile puts in the books. (Letting a failed first reconcile fall
	// through to the pool made nodes plan one ENI too many, create it and delete it unattached: 642 wasted
	// creates in a 1,000-node rollout.)
	if !n.answered.Load() {
		return
	}
	n.sweepOrphans(ctx, now)
	n.expireCooldowns(ctx)
	n.advancePending(ctx)
	n.syncDatapath(ctx)
	for range 16 {
		if ctx.Err() != nil || !n.poolStep(ctx) {
			break
		}
		n.syncDatapath(ctx)
	}
	n.metrics.refresh()
}

func (n *Node) expireCooldowns(ctx context.Context) {
	now := n.clock.Now()
	var expired bool
	n.View(func(st *journal.State) {
		for _, c := range st.Cooldowns {
			if !now.Before(c.Until) {
				expired = true
			}
		}
	})
	if !expired {
		return
	}
	_ = n.Update(ctx, func(st *journal.State) error {
		out := st.Cooldowns[:0]
		for _, c := range st.Cooldowns {
			if now.Before(c.Until) {
				out = append(out, c)
			}
		}
		st.Cooldowns = out
		return nil
	})
}

// advancePending moves every unfinished ENI operation on, step after step, until it rests or fails.
func (n *Node) advancePending(ctx context.Context) {
	var ops []string
	n.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.State != journal.Ready && !(e.State == journal.Attached && e.Primary) {
				ops = append(ops, e.OpID)
			}
		}
	})
	// Each operation is its own commit: drive them side by side, as the warm-up that started them did, so one
	// waiting for an attach token does not hold back another that could create or modify.
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Go(func() { n.drive(ctx, op) })
	}
	wg.Wait()
	var pendingIPs bool
	n.View(func(st *journal.State) { pendingIPs = len(st.IPOps) > 0 })
	if pendingIPs {
		if err := n.eni.ResumeIPOps(ctx); err != nil {
			n.log.Debug("resuming IP operations", "error", err)
		}
	}
}

// drive advances one operation until it rests, fails, or waits on its backoff.
func (n *Node) drive(ctx context.Context, opID string) {
	for range 8 {
		n.backoffMu.Lock()
		b, ok := n.backoffs[opID]
		n.backoffMu.Unlock()
		if ok && n.clock.Now().Before(b.until) {
			return
		}
		rec, ok := n.eni.Record(opID)
		if !ok || rec.State == journal.Ready {
			n.clearBackoff(opID)
			return
		}
		err := n.eni.Advance(ctx, opID)
		if err == nil {
			n.clearBackoff(opID)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		n.metrics.stepErrors.WithLabelValues(string(rec.State), eni.ErrorCode(err)).Inc()
		n.backoffMu.Lock()
		b = n.backoffs[opID]
		var wait time.Duration
		if ec2client.IsThrottle(err) {
			b.delay, wait = throttleDelay(b.delay)
		} else {
			b.delay = nextDelay(b.delay, err)
			wait = b.delay
		}
		b.until = n.clock.Now().Add(wait)
		n.backoffs[opID] = b
		n.backoffMu.Unlock()
		n.log.Warn("ENI step failed; will retry", "op", opID, "eni", rec.ID, "state", rec.State, "retryIn", wait, "error", err)
		// Look again when the wait is over rather than at the next pool interval, which may be seconds later.
		go func() {
			if n.clock.Sleep(ctx, wait) == nil {
				n.Wake()
			}
		}()
		n.poolBackoff(err)
		if errors.Is(err, eni.ErrBooksWrong) {
			n.eni.RequestReconcile()
		}
		return
	}
}

func (n *Node) clearBackoff(opID string) {
	n.backoffMu.Lock()
	delete(n.backoffs, opID)
	n.backoffMu.Unlock()
}

// nextDelay grows a retry delay: exponential from 1 s to 5 min; IAM and capacity refusals start higher.
func nextDelay(prev time.Duration, err error) time.Duration {
	floor := time.Second
	if errors.Is(err, eni.ErrUnauthorized) || errors.Is(err, eni.ErrSubnetFull) {
		floor = time.Minute
	}
	d := max(prev*2, floor)
	d = min(d, 5*time.Minute)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// maxThrottleDelay caps the node's wait before retrying a step that EC2 kept throttling. A throttle is not a
// failure of the step: the account's bucket refills every second, and the EC2 client's limiter already paces
// the node (its rate is cut, its own retries are spent). Growing this wait to minutes, as for real failures,
// left the last ENIs of a 1,000-node rollout idle while the account's bucket sat full.
const maxThrottleDelay = 15 * time.Second

// throttleDelay returns the next backoff window after a throttled step (doubling from 1 s up to
// maxThrottleDelay) and the wait drawn from it with full jitter, so that nodes throttled together come back
// spread over the whole window.
func throttleDelay(prev time.Duration) (window, wait time.Duration) {
	window = min(max(prev*2, time.Second), maxThrottleDelay)
	return window, time.Duration(rand.Int64N(int64(window)))
}

// poolBackoff stops pool growth for a while after errors a storm would not fix.
func (n *Node) poolBackoff(err error) {
	var why string
	switch {
	case errors.Is(err, eni.ErrSubnetFull):
		why = "subnet " + n.info.SubnetID + " has no free addresses (InsufficientFreeAddressesInSubnet)"
	case errors.Is(err, eni.ErrUnauthorized):
		why = "EC2 denies the calls (UnauthorizedOperation): check the node's IAM policy"
	default:
		return
	}
	n.backoffMu.Lock()
	n.poolDelay = nextDelay(n.poolDelay, err)
	n.poolUntil = n.clock.Now().Add(n.poolDelay)
	until := n.poolUntil
	n.backoffMu.Unlock()
	n.setPoolState(fmt.Sprintf("%s; backing off until %s", why, until.UTC().Format(time.RFC3339)))
	n.metrics.poolBackoffs.Inc()
}
