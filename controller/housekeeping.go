package controller

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/internal/clock"
)

// throttleReporter is what the node asks its EC2 client (*ec2client.Client) to pace its housekeeping.
type throttleReporter interface {
	// LastThrottle returns when EC2 last throttled action, zero if never.
	LastThrottle(action string) time.Time
}

// describeAction is the bucket the reconcile and the orphan sweep draw from.
const describeAction = "DescribeNetworkInterfaces"

// housekeeping paces the work that keeps the books honest but unblocks no pod: the reconcile with EC2 and the
// cluster-wide sweep for orphaned ENIs. Who may touch it: only the Run loop, except answered, which any
// goroutine reads (Ready).
type housekeeping struct {
	eni *eni.Manager
	// throttles tells when EC2 last throttled an action; nil when the EC2 client does not say.
	throttles            throttleReporter
	reconcileInterval    time.Duration
	maxReconcileInterval time.Duration
	orphanSweepInterval  time.Duration
	// podsWaiting is the node's pods waiting for an IP at now (addLine.demand); nil: none.
	podsWaiting func(now time.Time) int
	clock       clock.Clock
	log         *slog.Logger
	metrics     *metrics
	// denied is the status line while EC2 denies the reconcile (IAM), or "".
	denied statusNote

	// answered is set once EC2 has answered a reconcile, or IMDS gave a new instance its first view: the node
	// is ready.
	answered atomic.Bool

	// lastRecon and nextRecon bound the periodic reconcile; reconcileEvery is its interval now, stretched
	// while the account throttles describes.
	lastRecon      time.Time
	nextRecon      time.Time
	reconcileEvery time.Duration
	// sweepEvery is the orphan sweep's mean interval now, stretched while sweeps find nothing to collect.
	sweepEvery time.Duration
	nextSweep  time.Time
	// startTries counts the failed tries of the first reconcile (startRetry).
	startTries int
	// viewTried is set once the first view from IMDS was tried (viewFromIMDS).
	viewTried bool
}

// reconcileDue reports whether the reconcile is due: periodically, and at once when the ENI manager asks. The
// periodic reconcile is housekeeping that unblocks no pod: while the node's own pods wait for the IPs its pool
// is bringing it waits, at most MaxReconcileInterval after the last reconcile (in a 1,000-node rollout in
// fragmented subnets, whose pods wait minutes for the account's assign bucket, the periodic reconciles were
// half the describes sent before the last pod had its IP). A reconcile the ENI manager asks for, or a first one,
// never waits.
func (h *housekeeping) reconcileDue(now time.Time) bool {
	switch {
	case h.nextRecon.IsZero() || h.eni.NeedsReconcile():
		return true
	case now.Before(h.nextRecon):
		return false
	case !h.answered.Load() || h.podsWaiting == nil:
		return true
	}
	return h.podsWaiting(now) == 0 || now.Sub(h.lastRecon) >= h.maxReconcileInterval
}

// reconcile compares the books with EC2 and schedules the next periodic reconcile.
//
// The periodic reconcile is housekeeping, and "calls that unblock pods go before housekeeping": at 1,000 nodes,
// two filtered DescribeNetworkInterfaces per node every minute are 33 calls/s against the account's 20/s
// refill, so the reconciles alone keep the describe bucket dry and the describes a commit needs (a resumed
// attach reads EC2 first) starve. So while this node's describes are being throttled the interval doubles,
// up to Config.MaxReconcileInterval, and it halves back toward ReconcileInterval once they are not. A
// reconcile that a surprising answer asked for (eni.Manager.NeedsReconcile) is never postponed.
func (h *housekeeping) reconcile(ctx context.Context) {
	if !h.answered.Load() && !h.viewTried {
		h.viewTried = true
		if h.viewFromIMDS(ctx) {
			return
		}
	}
	started := h.clock.Now()
	rep, err := h.eni.Reconcile(ec2client.WithOwnSchedule(ctx))
	h.metrics.observeReconcile(rep, err)
	now := h.clock.Now()
	if err != nil {
		h.log.Warn("reconcile failed", "error", err)
	}
	h.denied.set("")
	if errors.Is(err, ec2client.ErrUnauthorized) {
		o := refusalPolicy[kindUnauthorized]
		h.denied.setBecause(o.reason, o.why("", "", err))
	}
	pressed := ec2client.IsThrottle(err) || h.describeThrottledSince(h.lastRecon) ||
		h.describeThrottledSince(started)
	h.paceReconcile(pressed, err != nil, rep.Quiet())
	// A partial failure (e.g. one GC delete) still leaves the books compared with EC2; a failure to list does
	// not. Until the first list succeeds the node can do nothing else, so it tries again soon.
	if err != nil && rep.Attached == 0 {
		if h.answered.Load() {
			h.nextRecon = now.Add(jitter(h.reconcileEvery))
			return
		}
		h.nextRecon = now.Add(h.startRetry())
		return
	}
	h.lastRecon = now
	h.nextRecon = now.Add(jitter(h.reconcileEvery))
	if !h.answered.Swap(true) {
		h.log.Info("pool ready", "attached", rep.Attached)
	}
}

// viewFromIMDS gives a new instance its first view of its ENIs from IMDS (eni.Manager.ViewFromIMDS) and
// reports whether it did: the node is then ready without a describe. The view counts as a reconcile that found
// the books right, so the first reconcile with EC2 (two describes: the attached ENIs and the instance's own
// available ones) comes at twice the ReconcileInterval on average, spread uniformly over one to three of them:
// a rollout's nodes, started in the same seconds, then do not describe together a minute later either (1,000
// nodes over two minutes ask 17 describes a second of the account's 20).
func (h *housekeeping) viewFromIMDS(ctx context.Context) bool {
	ok, err := h.eni.ViewFromIMDS(ctx)
	if err != nil {
		h.log.Info("no first view from IMDS; asking EC2", "error", err)
	}
	if !ok {
		return false
	}
	every, now := h.reconcileInterval, h.clock.Now()
	h.lastRecon, h.nextRecon = now, now.Add(every+time.Duration(rand.Int64N(2*int64(every)+1)))
	h.paceReconcile(false, false, true)
	h.answered.Store(true)
	h.log.Info("pool ready", "attached", 1, "from", "IMDS")
	return true
}

// startRetryFirst is the window of the first retry of a failed first reconcile; each further failure doubles
// it, up to the ReconcileInterval.
const startRetryFirst = 20 * time.Second

// startRetry is the wait before the next try of a first reconcile that failed: uniform in a window that
// doubles with each failed try (full jitter). Until the first reconcile answers, nothing else of the node
// moves, but a rollout's nodes start in the same seconds on an account bucket of 100 describes refilled 20 a
// second: with a fixed 10 s between tries they came back together and were throttled again, while spread over
// a growing window the most of them find tokens at their second try.
func (h *housekeeping) startRetry() time.Duration {
	window := min(startRetryFirst<<min(h.startTries, 8), max(h.reconcileInterval, startRetryFirst))
	h.startTries++
	return time.Duration(rand.Int64N(int64(window)) + 1)
}

// paceReconcile sets the periodic reconcile interval: it doubles, up to maxReconcileInterval, after a
// reconcile under describe throttling (pressed) or one that found the books and EC2 agreeing (quiet); after
// one that found something to set right it is back to reconcileInterval, and after an unthrottled failure it
// halves toward it. A quiet node thus reconciles at 1, 2, 4, 8 then every 10 minutes (the defaults), a node
// whose ENIs are touched behind its back every minute. It logs only when the interval changes between normal
// and stretched.
func (h *housekeeping) paceReconcile(pressed, failed, quiet bool) {
	prev := h.reconcileEvery
	switch {
	case pressed || !failed && quiet:
		h.reconcileEvery = min(max(prev*2, h.reconcileInterval), h.maxReconcileInterval)
	case failed:
		h.reconcileEvery = max(prev/2, h.reconcileInterval)
	default:
		h.reconcileEvery = h.reconcileInterval
	}
	switch {
	case prev == h.reconcileInterval && h.reconcileEvery > prev && pressed:
		h.log.Info("EC2 throttles describes; stretching the periodic reconcile", "interval", h.reconcileEvery)
	case prev > h.reconcileInterval && h.reconcileEvery == h.reconcileInterval:
		h.log.Info("periodic reconcile back to normal", "interval", h.reconcileEvery)
	}
}

// describeThrottledSince reports whether EC2 throttled this node's describes after t.
func (h *housekeeping) describeThrottledSince(t time.Time) bool {
	if h.throttles == nil {
		return false
	}
	last := h.throttles.LastThrottle(describeAction)
	return !last.IsZero() && last.After(t)
}

// jitter spreads d by ±10%, so that nodes started together do not reconcile in the same second forever.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d - d/10 + time.Duration(rand.Int64N(int64(d)/5+1))
}

// maxSweepStretch caps the stretch of the orphan sweep: a node whose sweeps find nothing sweeps at 1, 2, 4, then
// every 6 OrphanSweepIntervals (5, 10, 20, then every 30 minutes with the defaults).
const maxSweepStretch = 6

// sweepOrphans runs the cluster-wide sweep for orphaned ENIs when it is due (see Config.OrphanSweepInterval).
// It is housekeeping too: while the node's describes are throttled it waits another interval, and while the
// node's own pods wait for IPs it waits until they have them (in a 300-node rollout in fragmented subnets the
// sweeps were a fifth of the describes sent before the last pod had its IP). A sweep that collects nothing
// doubles the node's interval, up to maxSweepStretch of it, and one that collects an orphan brings it back:
// every node sweeps for the whole cluster, so a cluster whose nodes find nothing still sweeps every 30 min / N
// (seconds at 1,000 nodes, where 5-minute sweeps were a third of the describes of a rollout in fragmented
// subnets; 10 minutes at 3 nodes), and orphans, which only a create answered but not yet marked
// delete-on-termination leaves (see eni.SweepOrphans), bring the nodes that find them back to the interval.
func (h *housekeeping) sweepOrphans(ctx context.Context, now time.Time) {
	if h.orphanSweepInterval <= 0 {
		return
	}
	if h.nextSweep.IsZero() {
		// Not at once, nor sooner than later sweeps: a rollout's nodes would all sweep in its first seconds,
		// and a node just started has nothing to collect that the cluster's other nodes would not.
		h.nextSweep = now.Add(spread(h.sweepEvery))
		return
	}
	if now.Before(h.nextSweep) || h.podsWaiting != nil && h.podsWaiting(now) > 0 {
		return
	}
	if h.describeThrottledSince(now.Add(-h.reconcileInterval)) {
		h.nextSweep = now.Add(spread(h.sweepEvery))
		return
	}
	collected, err := h.eni.SweepOrphans(ec2client.WithOwnSchedule(ctx))
	h.metrics.orphans.Add(float64(len(collected)))
	if err != nil {
		h.log.Warn("sweeping orphaned ENIs", "error", err)
	}
	switch {
	case len(collected) > 0:
		h.sweepEvery = h.orphanSweepInterval
	case err == nil:
		h.sweepEvery = min(2*h.sweepEvery, maxSweepStretch*h.orphanSweepInterval)
	}
	h.nextSweep = now.Add(spread(h.sweepEvery))
}

// spread is a wait of 0.5 to 1.5 times d, uniformly.
func spread(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}
