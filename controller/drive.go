package controller

// The pool manager drives each unfinished ENI operation step by step (opDrives), and answers a failed step as
// refusalPolicy says: a retry of the operation after its own backoff, and the pause of an action or of the
// pool where the kind of failure calls for one.

import (
	"context"
	"errors"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
)

// advancePending moves every unfinished ENI operation on, step after step, until it rests or fails.
func (m *poolManager) advancePending(ctx context.Context) {
	var ops []string
	m.books.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.State != journal.Ready && e.State != journal.Moved && !(e.State == journal.Attached && e.Primary) {
				ops = append(ops, e.OpID)
			}
		}
	})
	// Each operation is its own commit: drive them side by side in the background, so one waiting for an
	// attach token, a slow detach or an EC2 call that does not answer holds back neither another operation
	// nor the round (growth, the reconcile, the datapath's ENIs).
	for _, op := range ops {
		m.launch(ctx, op)
	}
	var pendingIPs bool
	m.books.View(func(st *journal.State) { pendingIPs = len(st.IPOps) > 0 })
	if pendingIPs {
		if err := m.eni.ResumeIPOps(ctx); err != nil {
			m.log.Debug("resuming IP operations", "error", err)
		}
	}
}

// launch drives opID in the background unless its drive runs already. The round does not wait for it; a
// drive that moved its operation on wakes the Run loop.
func (m *poolManager) launch(ctx context.Context, opID string) {
	m.drives.start(opID, func() bool { return m.drive(ctx, opID) }, m.wake)
}

// drive advances one operation until it rests, fails, or waits on its backoff, and reports whether a step
// succeeded.
func (m *poolManager) drive(ctx context.Context, opID string) (moved bool) {
	for range 8 {
		if m.books.Broken() != nil {
			return moved // the record may be in memory only: no EC2 call for it
		}
		if m.drives.waiting(opID, m.clock.Now()) {
			return moved
		}
		rec, ok := m.eni.Record(opID)
		if !ok || rec.State == journal.Ready || rec.State == journal.Moved {
			m.drives.clear(opID)
			return moved
		}
		if rec.State == journal.Planned && rec.Attempts == 0 && m.place.PassedOver(rec.SubnetID) {
			// Planned with its round-mates before the subnet refused one of them, never sent: the create
			// would be refused too, and spend a token of the account's bucket. The pool plans again, elsewhere.
			if err := m.eni.DropPlan(ctx, opID); err != nil {
				m.log.Warn("dropping a plan for a refused subnet", "op", opID, "error", err)
				return moved
			}
			m.drives.clear(opID)
			return true
		}
		err := m.eni.Advance(ctx, opID)
		if err == nil {
			switch rec.State {
			case journal.Planned:
				m.refusals.accepted(actionCreate)
				if rec.WantPrefixes > 0 {
					m.fallback.accepted(rec.SubnetID, m.clock.Now())
				}
			case journal.Created:
				m.refusals.accepted(actionAttach)
			}
			m.drives.clear(opID)
			moved = true
			continue
		}
		if ctx.Err() != nil {
			return moved
		}
		kind := refusalOf(err)
		switch {
		case rec.State == journal.Planned && rec.GroupSet != "" && (kind == kindDefinite || kind == kindUnauthorized):
			// The create dropped its plan; the refusal is the set's groups' (one that does not exist, one the
			// IAM policy does not allow: deploy/iam-policy.json admits groups tagged for the cluster), not the
			// node's (refusals.go).
			m.metrics.stepErrors.WithLabelValues(string(rec.State), refusalCode(err)).Inc()
			m.setRefused(rec, err)
			m.drives.clear(opID)
			return moved
		case rec.State == journal.Planned && kind == kindNoPrefix:
			// The plan goes only now that the fallback holds: the pool plans again at once, with single IPs.
			m.fallback.refused(rec.SubnetID, m.clock.Now(), err)
			if derr := m.eni.DropPlan(ctx, opID); derr != nil {
				m.log.Warn("dropping a plan for prefixes", "op", opID, "error", derr)
			}
			m.drives.clear(opID)
			return true
		case rec.State == journal.Planned && kind == kindSubnetFull && m.place.SubnetFull(ctx, rec.SubnetID):
			// The create dropped its plan; the pool plans again at once, in the next candidate subnet. The
			// candidates log the refusal once; the status lists the subnet as refused.
			m.metrics.stepErrors.WithLabelValues(string(rec.State), ec2client.ErrorCode(err)).Inc()
			m.drives.clear(opID)
			return true
		}
		m.metrics.stepErrors.WithLabelValues(string(rec.State), refusalCode(err)).Inc()
		if until := m.refuseIfDue(stepAction(rec.State), err); !until.IsZero() {
			m.drives.clear(opID)
			m.wakeAt(ctx, until)
			if rec.State == journal.Planned {
				return moved // the refused create dropped its plan: the pool plans again once the pause is over
			}
			// An attach that found no free device index left its ENI to be deleted unattached (its next step);
			// no other is created until the pause is over (it grows while attaches find no slot), by when the
			// reconcile has counted what holds the slots.
			continue
		}
		wait, until := m.drives.failed(opID, m.clock.Now(), refusalPolicy[kind].retry)
		m.log.Warn("ENI step failed; will retry", "op", opID, "eni", rec.ID, "state", rec.State, "retryIn", wait, "error", err)
		// Look again when the wait is over rather than at the next pool interval, which may be seconds later.
		m.wakeAt(ctx, until)
		m.pausePoolIfDue(err, rec.SubnetID)
		if errors.Is(err, ec2client.ErrBooksWrong) {
			m.eni.RequestReconcile()
		}
		return moved
	}
	return moved
}

// wakeAt wakes the Run loop at t (unless ctx ends first), so that what waits until then is looked at again
// then rather than at the next pool interval.
func (m *poolManager) wakeAt(ctx context.Context, t time.Time) {
	go func() {
		if m.clock.Sleep(ctx, t.Sub(m.clock.Now())) == nil {
			m.wake()
		}
	}()
}

// stepAction is the action the next step of an operation in state calls, where growth pauses it after a
// refusal; "" for the others.
func stepAction(state journal.ENIState) string {
	switch state {
	case journal.Planned:
		return actionCreate
	case journal.Created:
		return actionAttach
	}
	return ""
}
