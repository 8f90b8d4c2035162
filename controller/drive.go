package controller

// The pool manager drives each unfinished ENI operation step by step, and backs off per operation and for the
// pool as a whole after failures (see poolManager for who may touch the backoffs).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/subnet"
)

// backoff is when one ENI operation may be tried again, and the delay that got it there.
type backoff struct {
	until time.Time
	delay time.Duration
}

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

// launch drives opID in the background unless its drive runs already (the steps of one operation never run
// concurrently). The round does not wait for it; a drive that moved its operation on wakes the Run loop.
func (m *poolManager) launch(ctx context.Context, opID string) {
	m.mu.Lock()
	if m.driving[opID] {
		m.mu.Unlock()
		return
	}
	m.driving[opID] = true
	m.mu.Unlock()
	m.drives.Go(func() {
		moved := m.drive(ctx, opID)
		m.mu.Lock()
		delete(m.driving, opID)
		m.mu.Unlock()
		if moved {
			m.wake()
		}
	})
}

// drive advances one operation until it rests, fails, or waits on its backoff, and reports whether a step
// succeeded.
func (m *poolManager) drive(ctx context.Context, opID string) (moved bool) {
	for range 8 {
		if m.books.Broken() != nil {
			return moved // the record may be in memory only: no EC2 call for it
		}
		m.mu.Lock()
		b, ok := m.backoffs[opID]
		m.mu.Unlock()
		if ok && m.clock.Now().Before(b.until) {
			return moved
		}
		rec, ok := m.eni.Record(opID)
		if !ok || rec.State == journal.Ready || rec.State == journal.Moved {
			m.clearBackoff(opID)
			return moved
		}
		if rec.State == journal.Planned && rec.Attempts == 0 && m.place.PassedOver(rec.SubnetID) {
			// Planned with its round-mates before the subnet refused one of them, never sent: the create
			// would be refused too, and spend a token of the account's bucket. The pool plans again, elsewhere.
			if err := m.eni.DropPlan(ctx, opID); err != nil {
				m.log.Warn("dropping a plan for a refused subnet", "op", opID, "error", err)
				return moved
			}
			m.clearBackoff(opID)
			return true
		}
		err := m.eni.Advance(ctx, opID)
		if err == nil {
			switch rec.State {
			case journal.Planned:
				m.accepted(actionCreate)
				if rec.WantPrefixes > 0 {
					m.fallback.accepted(rec.SubnetID, m.clock.Now())
				}
			case journal.Created:
				m.accepted(actionAttach)
			}
			m.clearBackoff(opID)
			moved = true
			continue
		}
		if ctx.Err() != nil {
			return moved
		}
		if rec.State == journal.Planned && m.prefixRefused(rec.SubnetID, err) {
			// The plan goes only now that the fallback holds: the pool plans again at once, with single IPs.
			if derr := m.eni.DropPlan(ctx, opID); derr != nil {
				m.log.Warn("dropping a plan for prefixes", "op", opID, "error", derr)
			}
			m.clearBackoff(opID)
			return true
		}
		if rec.State == journal.Planned && errors.Is(err, ec2client.ErrSubnetFull) && m.place.SubnetFull(ctx, rec.SubnetID) {
			// The create dropped its plan; the pool plans again at once, in the next candidate subnet. The
			// candidates log the refusal once; the status lists the subnet as refused.
			m.metrics.stepErrors.WithLabelValues(string(rec.State), ec2client.ErrorCode(err)).Inc()
			m.clearBackoff(opID)
			return true
		}
		if rec.State == journal.Created && errors.Is(err, eni.ErrNoDeviceIndex) {
			// The ENI is being deleted unattached (its next step); no other is created until the pause is
			// over (it grows while attaches find no slot), by when the reconcile has counted what holds them.
			m.metrics.stepErrors.WithLabelValues(string(rec.State), codeNoDeviceIndex).Inc()
			m.refuse(actionAttach, codeNoDeviceIndex, m.noSlotNote(err))
			m.clearBackoff(opID)
			m.wakeAt(ctx, m.refusalEnd(actionAttach))
			continue
		}
		if rec.State == journal.Planned && m.noteRefusal(actionCreate, err) {
			// The plan is dropped; the pool plans again once the refusal's pause is over.
			m.metrics.stepErrors.WithLabelValues(string(rec.State), ec2client.ErrorCode(err)).Inc()
			m.clearBackoff(opID)
			m.wakeAt(ctx, m.refusalEnd(actionCreate))
			return moved
		}
		m.metrics.stepErrors.WithLabelValues(string(rec.State), ec2client.ErrorCode(err)).Inc()
		m.mu.Lock()
		b = m.backoffs[opID]
		var wait time.Duration
		if ec2client.IsThrottle(err) {
			b.delay, wait = throttleDelay(b.delay)
		} else {
			b.delay = nextDelay(b.delay, err)
			wait = b.delay
		}
		b.until = m.clock.Now().Add(wait)
		m.backoffs[opID] = b
		m.mu.Unlock()
		m.log.Warn("ENI step failed; will retry", "op", opID, "eni", rec.ID, "state", rec.State, "retryIn", wait, "error", err)
		// Look again when the wait is over rather than at the next pool interval, which may be seconds later.
		m.wakeAt(ctx, b.until)
		m.poolBackoffIn(err, rec.SubnetID)
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

func (m *poolManager) clearBackoff(opID string) {
	m.mu.Lock()
	delete(m.backoffs, opID)
	m.mu.Unlock()
}

// nextDelay grows a retry delay: exponential from 1 s to 5 min; IAM and capacity refusals start higher.
func nextDelay(prev time.Duration, err error) time.Duration {
	floor, ceiling := time.Second, 5*time.Minute
	if errors.Is(err, ec2client.ErrUnauthorized) || errors.Is(err, ec2client.ErrSubnetFull) {
		floor = time.Minute
	}
	if errors.Is(err, subnet.ErrNoPlacement) {
		// Mostly a local check (an ENIConfig still missing or in another zone): a fix should not wait long.
		ceiling = 30 * time.Second
	}
	d := max(prev*2, floor)
	d = min(d, ceiling)
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
func (m *poolManager) poolBackoff(err error) { m.poolBackoffIn(err, "") }

// poolBackoffIn is poolBackoff after a call in subnetID ("": the node's own).
func (m *poolManager) poolBackoffIn(err error, subnetID string) {
	if subnetID == "" {
		subnetID = m.subnetID
	}
	var why string
	switch {
	case errors.Is(err, subnet.ErrNoPlacement):
		why = err.Error()
	case errors.Is(err, ec2client.ErrSubnetFull):
		why = "subnet " + subnetID + " has no free addresses (" + ec2client.ErrorCode(err) + ")"
	case errors.Is(err, ec2client.ErrUnauthorized):
		why = "EC2 denies the calls (UnauthorizedOperation): check the node's IAM policy"
	default:
		return
	}
	m.mu.Lock()
	m.delay = nextDelay(m.delay, err)
	m.until = m.clock.Now().Add(m.delay)
	until := m.until
	m.mu.Unlock()
	m.status.set(fmt.Sprintf("%s; backing off until %s", why, until.UTC().Format(time.RFC3339)))
	m.metrics.poolBackoffs.Inc()
}
