package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/internal/clock"
)

// poolManager moves the pool toward its warm targets: it grows it (IPs on ENIs with room, new ENIs through the
// commit), drives unfinished ENI operations on (drive.go), expires cooldowns, and releases surplus after the
// hysteresis. Who may touch it: only the Run loop, except the backoffs, which the ENI commits of one round
// share side by side under mu.
type poolManager struct {
	books        *books
	eni          *eni.Manager
	targets      pool.Targets
	limits       pool.Limits
	releaseDelay time.Duration
	poolInterval time.Duration
	subnetID     string
	// urgent marks a context for calls that unblock pods; may be nil.
	urgent  func(context.Context) context.Context
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics
	status  *poolStatus
	// wake asks the Run loop for another round.
	wake func()
	// place says where new ENIs go and which ENIs pods may no longer use.
	place *subnet.Placer

	surplusSince time.Time

	mu sync.Mutex
	// backoffs is when each ENI operation may be tried again; until and delay are the pool-wide backoff.
	backoffs map[string]backoff
	until    time.Time
	delay    time.Duration
	// driving are the operations whose drive runs in the background (drive.go); drives is their group,
	// which Run waits for before it returns.
	driving map[string]bool
	drives  sync.WaitGroup
	// refused pauses an action after a definite refusal; refusalDelay is the pause per error code
	// (refusals.go).
	refused      map[string]refusal
	refusalDelay map[string]time.Duration
	// closed are ENIs EC2 refuses secondary IPs for (closed.go), and why.
	closed map[string]closure
	// fallback is set while a fragmented subnet refuses prefixes (prefixfallback.go).
	fallback *prefixFallback
}

// targetsAt are the targets in force at now: in prefix mode, growth in single IPs while the fallback holds.
func (m *poolManager) targetsAt(now time.Time) pool.Targets {
	t := m.targets
	t.Fallback = t.Prefixes && m.fallback.active(now)
	return t
}

// step makes one change toward the warm targets and reports whether it did something (and may do more).
func (m *poolManager) step(ctx context.Context) bool {
	now := m.clock.Now()
	m.mu.Lock()
	until := m.until
	m.mu.Unlock()
	if now.Before(until) {
		return false
	}
	var d pool.Decision
	var c pool.Counts
	var releasable map[string][]string
	limits := m.limitsNow()
	targets := m.targetsAt(now)
	m.books.View(func(st *journal.State) {
		v := pool.NewView(st, now)
		c = m.counts(v)
		d = targets.Decide(limits, c)
		if d.ReleaseIPs > 0 {
			releasable = v.Releasable(d.ReleaseIPs, d.PrefixesOnly)
		}
	})
	if d.AddIPs == 0 && !d.NewENI && d.ReleaseIPs == 0 && d.ReleaseENI == "" {
		m.surplusSince = time.Time{}
		switch {
		case c.Free() == 0 && c.Assigned() >= targets.MaxPods:
			m.status.set(maxPodsReached(c.Assigned(), targets.MaxPods).Error())
		case d.AtLimit:
			m.status.set(m.atLimitNote(targets, c))
		default:
			m.mu.Lock()
			m.delay = 0
			m.mu.Unlock()
			m.status.set(m.standingNote())
		}
		return false
	}
	// Calls that unblock pods go first in the EC2 client's queue.
	if c.Free() == 0 && m.urgent != nil {
		ctx = m.urgent(ctx)
	}
	if d.AddIPs > 0 || d.NewENI {
		m.surplusSince = time.Time{}
		return m.grow(ctx, targets, limits, now)
	}
	// Surplus: release only after it has lasted the hysteresis delay. A repack goes at once: pods would take
	// the free single IPs meanwhile.
	if m.surplusSince.IsZero() && !d.Repack {
		m.surplusSince = now
		return false
	}
	if now.Sub(m.surplusSince) < m.releaseDelay && !d.Repack {
		return false
	}
	if d.ReleaseIPs > 0 {
		if len(releasable) == 0 {
			return false // what may go waits for the cooldowns of a later ENI's prefix (pool.View.Releasable)
		}
		if m.refusedNow(actionUnassign, now) {
			return false
		}
		var errs []error
		for id, ips := range releasable {
			err := m.eni.UnassignIPs(ctx, id, ips)
			switch {
			case err == nil:
				m.accepted(actionUnassign)
			case m.unassignRefused(err):
				m.wakeAt(ctx, m.refusalEnd(actionUnassign))
			default:
				errs = append(errs, err)
			}
		}
		return m.result(errors.Join(errs...), "releasing surplus IPs")
	}
	op, err := m.eni.StartRelease(ctx, d.ReleaseENI)
	if err != nil {
		return m.result(err, "releasing ENI")
	}
	m.surplusSince = time.Time{}
	m.launch(ctx, op)
	return true
}

// atLimitNote is the status line while the pool (c) is short but may not add an ENI: what holds the slots.
func (m *poolManager) atLimitNote(t pool.Targets, c pool.Counts) string {
	s := "short of IPs but at the ENI limit"
	if f := m.foreignNote(); f != "" {
		s += ": " + f
	}
	if n := c.SingleSlots(); t.Prefixes && n > 0 {
		s += fmt.Sprintf("; %d slots hold single IPs, so the node addresses %d IPs, not max pods %d, "+
			"until they are free and given back for /28 prefixes", n, c.Total(), t.MaxPods)
	}
	return s
}

func (m *poolManager) result(err error, what string) bool {
	if err == nil {
		return true
	}
	m.log.Warn("pool step failed", "step", what, "error", err)
	m.poolBackoff(err)
	m.mu.Lock()
	if !m.clock.Now().Before(m.until) {
		// Not a capacity or IAM refusal: pause this round only.
		m.delay = nextDelay(m.delay/2, err)
		m.until = m.clock.Now().Add(min(m.delay, m.poolInterval))
	}
	m.mu.Unlock()
	m.status.setIfEmpty(fmt.Sprintf("%s failed: %v", what, err))
	return false
}

// grow closes the whole deficit in one round: it asks the arithmetic again and again, counting each answer as
// in flight (IPs on ENIs with room, with the full count per ENI in one call; new ENIs with their IPs in the
// create), then runs all of it at once. Each new ENI is its own journaled commit with its own ClientToken,
// driven in the background (launch); their device indexes are reserved in the books. In prefix mode each slot
// asked for is a /28 prefix (targets.Grain addresses). It reports whether anything succeeded (an assign, or a
// plan journaled), so the pool manager looks again at once.
func (m *poolManager) grow(ctx context.Context, targets pool.Targets, limits pool.Limits, now time.Time) bool {
	type addIPs struct {
		eni     string
		primary bool
		subnet  string
		n       int
	}
	grain := targets.Grain()
	prefixes := grain > 1
	var adds []addIPs
	var plans []int
	m.books.View(func(st *journal.State) {
		c := m.counts(pool.NewView(st, now))
		// An ENI with an assign in flight or of unknown outcome gets no more until EC2 has been read back.
		unsettled := map[string]bool{}
		for _, op := range st.IPOps {
			if op.Kind == journal.AssignIPs {
				unsettled[op.ENI] = true
			}
		}
		for range 4 * (limits.MaxENIs + 1) {
			d := targets.Decide(limits, c)
			if d.AddIPs > 0 {
				if m.refusedNow(actionAssign, now) {
					break
				}
				i := slices.IndexFunc(c.ENIs, func(e pool.ENICount) bool {
					return e.Slots < limits.IPsPerENI && !unsettled[e.ID] && !e.Closed
				})
				if i < 0 {
					break
				}
				k := min(slotsFor(d.AddIPs, grain), limits.IPsPerENI-c.ENIs[i].Slots)
				adds = append(adds, addIPs{c.ENIs[i].ID, c.ENIs[i].Primary, c.ENIs[i].Subnet, k})
				c.ENIs[i].Slots += k
				c.ENIs[i].IPs += k * grain
				continue
			}
			if d.NewENI {
				if m.refusedNow(actionCreate, now) || m.refusedNow(actionAttach, now) {
					break
				}
				k := slotsFor(d.NewENIIPs, grain)
				plans = append(plans, k)
				c.PendingENIs++
				c.PendingIPs += k * grain
				continue
			}
			break
		}
	})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		progress bool
		failures []func() bool
	)
	done := func(ok bool, fail func() bool) {
		mu.Lock()
		defer mu.Unlock()
		progress = progress || ok
		if fail != nil {
			failures = append(failures, fail)
		}
	}
	assign, plan := m.eni.AssignIPs, m.eni.Plan
	if prefixes {
		assign, plan = m.eni.AssignPrefixes, m.eni.PlanPrefixes
	}
	for _, a := range adds {
		wg.Go(func() {
			if err := assign(ctx, a.eni, a.n); err != nil {
				if m.prefixRefused(a.subnet, err) {
					done(true, nil) // decide again: the deficit comes as single IPs
					return
				}
				if a.primary && m.closeIfRefused(a.eni, err) {
					done(true, nil) // decide again: the deficit goes to secondary ENIs
					return
				}
				if m.closeIfFull(ctx, a.eni, a.subnet, err) {
					done(true, nil) // decide again: the deficit goes to a new ENI in another subnet
					return
				}
				if m.noteRefusal(actionAssign, err) {
					done(false, nil)
					return
				}
				done(false, func() bool { return m.result(err, "assigning IPs") })
				return
			}
			m.accepted(actionAssign)
			if prefixes {
				m.fallback.accepted(a.subnet, m.clock.Now())
			}
			done(true, nil)
		})
	}
	for _, want := range plans {
		wg.Go(func() {
			at, err := m.place.Place(ctx, want*grain)
			if err != nil {
				done(false, func() bool { return m.result(err, "placing ENI") })
				return
			}
			op, err := plan(ctx, want, at)
			if err != nil {
				done(false, func() bool { return m.result(err, "planning ENI") })
				return
			}
			m.launch(ctx, op)
			done(true, nil)
		})
	}
	wg.Wait()
	for _, f := range failures {
		f()
	}
	return progress
}

// slotsFor is how many slots of grain addresses hold n addresses.
func slotsFor(n, grain int) int { return (n + grain - 1) / grain }

// prefixRefused starts or prolongs the single-IP fallback of subnetID when err is that fragmented subnet's
// refusal of a prefix, and reports whether it was one. It pauses no growth, so eniwire_ec2_refusals_total
// does not count it; eniwire_prefix_fallback says it.
func (m *poolManager) prefixRefused(subnetID string, err error) bool {
	if !errors.Is(err, ec2client.ErrNoPrefix) {
		return false
	}
	m.fallback.refused(subnetID, m.clock.Now(), err)
	return true
}

func (m *poolManager) expireCooldowns(ctx context.Context) {
	now := m.clock.Now()
	var expired bool
	m.books.View(func(st *journal.State) {
		for _, c := range st.Cooldowns {
			if !now.Before(c.Until) {
				expired = true
			}
		}
	})
	if !expired {
		return
	}
	_ = m.books.Update(ctx, func(st *journal.State) error {
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
