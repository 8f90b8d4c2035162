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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/sgpool"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/clock"
)

// Node is one node's controller: it serves the agent API and runs the pool manager. It is a shell over parts
// that each own their state and say who may touch it.
type Node struct {
	info    metadata.Node
	cfg     Config
	clock   clock.Clock
	store   *journal.Store
	eni     *eni.Manager // the ENI commit and the reconciler; safe for concurrent use
	metrics *metrics
	wake    chan struct{}

	books  *books        // the journaled state; its own lock
	ipam   *ipam         // Assign/Release/Check/GC over the books and the datapath; any goroutine
	enis   *eniSync      // the datapath's ENIs; Run loop only
	repair *podRepair    // sets pods' datapath up again (start, ENI back, failures); Run loop only
	pool   *poolManager  // moves the pool toward its targets; Run loop only (its parts: their own locks)
	house  *housekeeping // reconcile and orphan-sweep pacing; Run loop only (answered: atomic)
	status *statusLine   // composed from the parts' lines; its own lock
	vpc    *vpcCIDRs     // the VPC's CIDR blocks, told to the datapath; Run loop only
	gone   *vanishedPods // releases assignments of pods that went without a DEL; Run loop only

	// place says where new ENIs go and which ENIs pods may use; its own lock.
	place *subnet.Placer
	// policyStatus is the PodGate's status line (nil without one that reports it).
	policyStatus func() string
}

// New opens the journal in cfg.StateDir, replays it into the books and returns the controller; Run starts it.
// A journal of an unknown version or one that cannot be read is an error (journal.ErrUnknownVersion,
// journal.ErrUnreadable) and the file is left untouched.
func New(cfg Config, deps Deps) (*Node, error) {
	cfg.defaults()
	if deps.EC2 == nil || deps.Node.InstanceID == "" {
		return nil, errors.New("building node controller: EC2 client and instance id are required")
	}
	if err := checkIPv6Mode(cfg, deps.Node); err != nil {
		return nil, fmt.Errorf("building node controller: %w", err)
	}
	if deps.PodSecurityGroups != nil && (cfg.EnableIPv6 || cfg.DualStack) {
		return nil, fmt.Errorf("building node controller: %w", ErrPodSecurityGroupsIPv6)
	}
	if cfg.CustomNetworking && deps.ENIConfigs == nil {
		return nil, errors.New("building node controller: custom networking needs an ENIConfig source")
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
	n := &Node{cfg: cfg, info: deps.Node, clock: deps.Clock, store: store, wake: make(chan struct{}, 1),
		books: &books{journal: j, st: st}, status: &statusLine{log: log}}
	n.books.onBroken = func(err error) {
		log.Error("journal failed; the node stops so that a restart replays what the disk holds", "error", err)
		n.Wake()
	}
	m, err := newMetrics(deps.Registerer, n.books.Broken)
	if err != nil {
		store.Close()
		return nil, err
	}
	n.metrics = m
	var custom subnet.ENIConfigSource
	if cfg.CustomNetworking {
		custom = deps.ENIConfigs
	}
	n.place = subnet.NewPlacer(subnet.Config{Discovery: !cfg.DisableSubnetDiscovery, VPCID: deps.Node.VPCID,
		AZ: deps.Node.AZ, SubnetID: deps.Node.SubnetID, SubnetCIDR: deps.Node.SubnetCIDRText(), Cluster: cfg.Cluster},
		subnet.Deps{EC2: deps.EC2, ENIConfigs: custom, Books: n.books, Clock: deps.Clock, Log: log})
	n.eni = eni.NewManager(eni.Config{
		InstanceID: deps.Node.InstanceID, Cluster: cfg.Cluster, SubnetID: deps.Node.SubnetID,
		SubnetCIDR: deps.Node.SubnetCIDRText(), SecurityGroups: deps.Node.SecurityGroups, MaxENIs: deps.Node.Limits.MaxENIs,
		GCGrace: cfg.GCGrace, SubnetCIDROf: n.place.CIDROf,
	}, deps.EC2, deps.IMDS, n.books, deps.Clock, log)
	targets, limits := poolTargets(cfg, deps.Node), pool.LimitsOf(deps.Node.Limits)
	log.Info("pool limits", "maxPods", targets.MaxPods, "prefixDelegation", targets.Prefixes,
		"subnetDiscovery", !cfg.DisableSubnetDiscovery, "customNetworking", cfg.CustomNetworking, "ipv6", cfg.EnableIPv6, "dualStack", cfg.DualStack)
	if cfg.EnablePrefixDelegation && !targets.Prefixes {
		log.Warn("prefix delegation asked for, but the instance type does not take prefixes (not Nitro); using secondary IPs",
			"type", deps.Node.InstanceType)
	}
	n.ipam = &ipam{books: n.books, dp: deps.Datapath, gate: deps.PodGate, cooldown: cfg.Cooldown, targets: targets, limits: limits,
		podMTU: cfg.PodMTU, clock: deps.Clock, log: log, metrics: m, ready: n.Ready, wake: n.Wake, avail: n.servable,
		poolStatus: n.status.compose, addWait: cfg.AddWait, ipv6: cfg.EnableIPv6, dual: cfg.DualStack,
		podGroups: deps.PodSecurityGroups, sets: &sgpool.Line{}, strictSets: !cfg.PodSecurityGroupsStandard}
	if r, ok := deps.Datapath.(interface{ RemovesHostVeth() bool }); ok {
		n.ipam.removesVeth = r.RemovesHostVeth()
	}
	if r, ok := deps.PodGate.(interface{ Status() string }); ok {
		n.policyStatus = r.Status
	}
	n.repair = &podRepair{ipam: n.ipam, clock: deps.Clock, log: log, due: map[api.Attachment]*repairTry{}}
	n.enis = &eniSync{books: n.books, dp: deps.Datapath, log: log, up: map[string]dptypes.ENI{}, failing: map[string]error{},
		cameUp: n.repair.eniUp}
	n.pool = (&poolManager{books: n.books, eni: n.eni, targets: targets, limits: limits, releaseDelay: cfg.ReleaseDelay,
		poolInterval: cfg.PoolInterval, subnetID: deps.Node.SubnetID, urgent: deps.Urgent, clock: deps.Clock, log: log,
		metrics: m, wake: n.Wake, place: n.place, waiting: n.ipam.line.demand, ipv6: cfg.EnableIPv6, dual: cfg.DualStack,
		sets: n.ipam.sets}).withParts()
	n.ipam.blocked = n.pool.blocked
	n.house = &housekeeping{eni: n.eni, reconcileInterval: cfg.ReconcileInterval,
		maxReconcileInterval: cfg.MaxReconcileInterval, orphanSweepInterval: cfg.OrphanSweepInterval,
		podsWaiting: n.ipam.line.demand, clock: deps.Clock, log: log, metrics: m, reconcileEvery: cfg.ReconcileInterval,
		sweepEvery: cfg.OrphanSweepInterval}
	// The pool's line first: the reconcile's denial matters most before the pool has anything to say.
	n.status.parts = []func() (string, string){n.pool.because, n.house.denied.because}
	n.house.throttles, _ = deps.EC2.(throttleReporter)
	n.vpc = newVPCCIDRs(deps.EC2, deps.Datapath, deps.Node, cfg.VPCRefreshInterval, log)
	n.gone = &vanishedPods{ipam: n.ipam, gone: netnsGone, grace: cfg.VanishedPodGrace, every: cfg.VanishedPodGrace / 4,
		clock: deps.Clock, log: log, released: m.vanished, since: map[api.Attachment]time.Time{}}
	log.Info("journal replayed", "enis", len(st.ENIs), "assignments", len(st.Assignments), "seq", st.Seq, "recovered", store.Recovered)
	return n, nil
}

// Close closes the journal. Call it after Run has returned.
func (n *Node) Close() error { return n.store.Close() }

// Snapshot returns a copy of the books.
func (n *Node) Snapshot() *journal.State { return n.books.Snapshot() }

// Ready reports whether the node serves ADDs: its journal replayed and either EC2 answered the pool once or,
// after a restart, the books hold an ENI pods may take addresses of whose datapath is up (Run brings the
// books' ENIs up before its first round); why not, if not. A restarted agent so serves from its journal while
// the reconcile with EC2 runs in the background: a runtime calling STATUS does not see the node NotReady for
// the seconds of every rollout, nor for as long as EC2 refuses Describe.
func (n *Node) Ready() (bool, string) {
	if err := n.books.Broken(); err != nil {
		return false, err.Error()
	}
	if !n.house.answered.Load() && !n.enis.anyUp(n.servable) {
		return false, "waiting for the first answer from EC2"
	}
	return true, ""
}

// servable reports whether the node can hand out ip of eniID now: the ENI's datapath is up and pods may
// still take its addresses (package subnet).
func (n *Node) servable(eniID, _ string) bool { return n.enis.isUp(eniID) && !n.place.IsRetired(eniID) }

// Healthy returns the journal failure that stopped the node (it wraps journal.ErrBroken when the store broke),
// or nil. Run returns the same error.
func (n *Node) Healthy() error { return n.books.Broken() }

// Wake asks the pool manager to look at the pool now.
func (n *Node) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Assign gives the attachment an IP from the warm pool, journals it, sets up the datapath and returns it. It
// never waits on EC2. A repeated request for the same attachment returns the same assignment.
func (n *Node) Assign(ctx context.Context, req api.AssignRequest) (*api.Assignment, error) {
	return n.ipam.Assign(ctx, req)
}

// Release puts the attachment's IP into cooldown (or straight back to the pool when req.Unused) and tears its
// datapath down. Releasing an unknown attachment succeeds with Released false.
func (n *Node) Release(ctx context.Context, req api.ReleaseRequest) (*api.ReleaseResponse, error) {
	return n.ipam.Release(ctx, req)
}

// Check returns the attachment's assignment, or ErrNotFound.
func (n *Node) Check(ctx context.Context, req api.CheckRequest) (*api.Assignment, error) {
	return n.ipam.Check(ctx, req)
}

// Assignments lists every assignment.
func (n *Node) Assignments() []api.Assignment { return n.ipam.Assignments() }

// GC releases every assignment of req's network whose attachment is not in req.Valid; other networks'
// assignments are not touched.
func (n *Node) GC(ctx context.Context, req api.GCRequest) (*api.GCResponse, error) {
	return n.ipam.GC(ctx, req)
}

// Run sets the datapath up from the books, then runs the pool manager until ctx ends, or until the journal
// fails: then it returns that failure (see Healthy) and makes no further EC2 call.
func (n *Node) Run(ctx context.Context) error {
	n.ipam.tellRunningSets()
	n.place.Observe(ctx)
	n.enis.sync(ctx)
	n.repair.all()
	n.repair.run(ctx)
	if j := n.cfg.StartJitter; j > 0 {
		if err := n.clock.Sleep(ctx, time.Duration(rand.Int64N(int64(j)))); err != nil {
			return nil
		}
	}
	// The operations driven in the background end with ctx (or stop at a broken journal) before Run returns.
	defer n.pool.drives.wait()
	for {
		n.tick(ctx)
		if err := n.books.Broken(); err != nil {
			return fmt.Errorf("running the node controller: %w", err)
		}
		wait := n.cfg.PoolInterval
		select {
		case <-ctx.Done():
			return nil
		case <-n.wake:
		case <-n.clock.After(wait):
		}
	}
}

// tick is one round of the Run loop: reconcile when due, settle unfinished operations, move the pool toward
// its targets, then set up the pods' datapath that needs it.
func (n *Node) tick(ctx context.Context) {
	if n.books.Broken() != nil {
		return
	}
	now := n.clock.Now()
	if n.house.reconcileDue(now) {
		n.house.reconcile(ctx)
	}
	// Right after the reconcile, which may have put the primary ENI in the books: with custom networking no
	// pod may get one of its addresses.
	n.place.Observe(ctx)
	// Nothing moves before EC2 has been read once: the pool's arithmetic counts the primary ENI and whatever a
	// previous run attached, which only a reconcile puts in the books. (Letting a failed first reconcile fall
	// through to the pool made nodes plan one ENI too many, create it and delete it unattached: 642 wasted
	// creates in a 1,000-node rollout.)
	if !n.house.answered.Load() {
		n.repair.run(ctx)
		return
	}
	n.vpc.refresh(ctx, now)
	n.place.LearnSubnets(ctx)
	n.house.sweepOrphans(ctx, now)
	n.gone.check(ctx, now)
	n.pool.expireCooldowns(ctx)
	n.pool.advancePending(ctx)
	n.enis.sync(ctx)
	for range 16 {
		if ctx.Err() != nil || !n.pool.step(ctx) {
			break
		}
		n.enis.sync(ctx)
		n.ipam.line.pokeFirst()
	}
	for range 4 {
		if ctx.Err() != nil || !n.pool.stepSets(ctx) {
			break
		}
	}
	n.ipam.sets.Poke()
	n.repair.run(ctx)
	// The ADD waiting first looks again: IPs may have landed, or the pool may have found it cannot grow.
	n.ipam.line.pokeFirst()
	n.metrics.refresh(n.Status())
}
