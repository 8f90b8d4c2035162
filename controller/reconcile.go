package controller

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
)

// throttleReporter is what the node asks its EC2 client (*ec2client.Client) to pace its housekeeping.
type throttleReporter interface {
	// LastThrottle returns when EC2 last throttled action, zero if never.
	LastThrottle(action string) time.Time
}

// describeAction is the bucket the reconcile and the orphan sweep draw from.
const describeAction = "DescribeNetworkInterfaces"

// reconcile compares the books with EC2 and schedules the next periodic reconcile.
//
// The periodic reconcile is housekeeping, and "calls that unblock pods go before housekeeping": at 1,000 nodes,
// two filtered DescribeNetworkInterfaces per node every minute are 33 calls/s against the account's 20/s
// refill, so the reconciles alone keep the describe bucket dry and the describes a commit needs (a resumed
// attach reads EC2 first) starve. So while this node's describes are being throttled the interval doubles,
// up to Config.MaxReconcileInterval, and it halves back toward ReconcileInterval once they are not. A
// reconcile that a surprising answer asked for (eni.Manager.NeedsReconcile) is never postponed.
func (n *Node) reconcile(ctx context.Context) {
	started := n.clock.Now()
	rep, err := n.eni.Reconcile(ctx)
	n.metrics.observeReconcile(rep, err)
	now := n.clock.Now()
	if err != nil {
		n.log.Warn("reconcile failed", "error", err)
		if errors.Is(err, eni.ErrUnauthorized) {
			n.setPoolState("EC2 denies the calls (UnauthorizedOperation): check the node's IAM policy")
		}
	}
	pressed := ec2client.IsThrottle(err) || n.describeThrottledSince(n.lastRecon) ||
		n.describeThrottledSince(started)
	n.paceReconcile(pressed)
	// A partial failure (e.g. one GC delete) still leaves the books compared with EC2; a failure to list does
	// not. Until the first list succeeds the node can do nothing else, so it tries again soon.
	if err != nil && rep.Attached == 0 {
		retry := min(n.cfg.ReconcileInterval, 10*time.Second)
		if n.answered.Load() {
			retry = n.reconcileEvery
		}
		n.nextRecon = now.Add(jitter(retry))
		return
	}
	n.lastRecon = now
	n.nextRecon = now.Add(jitter(n.reconcileEvery))
	if !n.answered.Swap(true) {
		n.log.Info("pool ready", "attached", rep.Attached)
	}
}

// paceReconcile stretches the periodic reconcile interval under describe throttling and shrinks it back when
// calm, logging only when it changes between normal and stretched.
func (n *Node) paceReconcile(pressed bool) {
	prev := n.reconcileEvery
	if pressed {
		n.reconcileEvery = min(max(prev*2, n.cfg.ReconcileInterval), n.cfg.MaxReconcileInterval)
	} else {
		n.reconcileEvery = max(prev/2, n.cfg.ReconcileInterval)
	}
	switch {
	case prev == n.cfg.ReconcileInterval && n.reconcileEvery > prev:
		n.log.Info("EC2 throttles describes; stretching the periodic reconcile", "interval", n.reconcileEvery)
	case prev > n.cfg.ReconcileInterval && n.reconcileEvery == n.cfg.ReconcileInterval:
		n.log.Info("describes no longer throttled; periodic reconcile back to normal", "interval", n.reconcileEvery)
	}
}

// describeThrottledSince reports whether EC2 throttled this node's describes after t.
func (n *Node) describeThrottledSince(t time.Time) bool {
	if n.throttles == nil {
		return false
	}
	last := n.throttles.LastThrottle(describeAction)
	return !last.IsZero() && last.After(t)
}

// jitter spreads d by ±10%, so that nodes started together do not reconcile in the same second forever.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d - d/10 + time.Duration(rand.Int64N(int64(d)/5+1))
}

// sweepOrphans runs the cluster-wide sweep for orphaned ENIs when it is due (see Config.OrphanSweepInterval).
// It is housekeeping too: while the node's describes are throttled it waits another interval.
func (n *Node) sweepOrphans(ctx context.Context, now time.Time) {
	every := n.cfg.OrphanSweepInterval
	if every <= 0 {
		return
	}
	if n.nextSweep.IsZero() {
		// Not at once: a rollout's nodes would all sweep in its first seconds.
		n.nextSweep = now.Add(time.Duration(rand.Int64N(int64(every))))
		return
	}
	if now.Before(n.nextSweep) {
		return
	}
	n.nextSweep = now.Add(every/2 + time.Duration(rand.Int64N(int64(every))))
	if n.describeThrottledSince(now.Add(-n.cfg.ReconcileInterval)) {
		return
	}
	collected, err := n.eni.SweepOrphans(ctx)
	n.metrics.orphans.Add(float64(len(collected)))
	if err != nil {
		n.log.Warn("sweeping orphaned ENIs", "error", err)
	}
}
