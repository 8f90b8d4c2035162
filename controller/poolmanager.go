package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/sgpool"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/internal/clock"
)

// poolManager moves the pool toward its warm targets: it grows it (IPs on ENIs with room, new ENIs through the
// commit), drives unfinished ENI operations on (drive.go), expires cooldowns, and releases surplus after the
// hysteresis. It is a shell over parts that each own their lock: what it does after each kind of EC2 refusal
// is refusalPolicy's. Who may touch it: only the Run loop, except the parts, which the ENI commits and the
// assigns of one round share side by side.
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
	// wake asks the Run loop for another round.
	wake func()
	// place says where new ENIs go and which ENIs pods may no longer use.
	place *subnet.Placer
	// waiting is the pods waiting for an IP at now (addLine.demand): growth is sized for them too.
	waiting func(now time.Time) int

	// surplusSince is when the pool last went over its targets; Run loop only.
	surplusSince time.Time

	pause    *poolPause     // the pool-wide pause
	refusals *refusalMemory // the pause of each action EC2 refused
	closed   *closedENIs    // ENIs EC2 refuses new IPs for (closed.go)
	drives   *opDrives      // the drives of ENI operations in flight, and their backoffs
	// fallback is set while a fragmented subnet refuses prefixes (prefixfallback.go).
	fallback *prefixFallback
	// ipv6: the pool is the primary ENI's one /80 (Config.EnableIPv6; stepIPv6), no warm target applies.
	ipv6 bool
	// dual: the pool is IPv4's, and the primary ENI holds the pods' /80 besides (Config.DualStack).
	dual bool
	// resting is why the pool rests short of its targets (max pods, the ENI limit), set each round it
	// rests and cleared when it moves; lastFailure is the last failed step's line, until the pool rests.
	resting, lastFailure statusNote
	// held is the refusal that held the last growth back (every call it needed was paused), or "".
	held statusNote
	// sets is the ADDs waiting for an address of their pod security-group set (nil: security groups for pods
	// are off); setIdle, since when each set's ENI has held no pod (setpools.go). Run loop only.
	sets    *sgpool.Line
	setIdle sgpool.Idle
}

// withParts makes m's parts and returns m.
func (m *poolManager) withParts() *poolManager {
	m.pause = &poolPause{clock: m.clock, counted: m.metrics.poolBackoffs}
	m.refusals = newRefusalMemory(m.clock, m.metrics.refusals)
	m.closed = &closedENIs{clock: m.clock}
	m.drives = &opDrives{}
	m.fallback = &prefixFallback{subnetID: m.subnetID, log: m.log, gauge: m.metrics.prefixFallback}
	return m
}

// status is the pool's line for the node's status, in a fixed priority: why it rests short of its targets,
// why growth is paused, the action EC2 refuses, the ENI closed to new IPs, the last failed step; or "".
func (m *poolManager) status() string {
	_, s := m.because()
	return s
}

// because is status with its reason (api.Pool*).
func (m *poolManager) because() (reason, line string) {
	for _, part := range []func() (string, string){m.resting.because, m.pause.because, m.refusals.because, m.closed.because, m.lastFailure.because} {
		if reason, line = part(); line != "" {
			return reason, line
		}
	}
	return "", ""
}

// blocked is why the pool cannot bring a pod an IP soon, naming the setting or action that fixes it, or ""
// while it is growing or will at its next round: it rests at max pods or the ENI limit, growth is paused
// after a refusal a retry will not fix (a full subnet, IAM, no subnet for a new ENI), or EC2 refuses both the
// assign or the create that the pool's last growth needed (held). Any goroutine.
func (m *poolManager) blocked(now time.Time) string {
	if s := m.resting.get(); s != "" {
		return s
	}
	if s := m.pause.status(); s != "" && m.pause.pausedAt(now) {
		return s
	}
	return m.held.get()
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
	if m.pause.pausedAt(now) {
		return false
	}
	if m.ipv6 {
		return m.stepIPv6(ctx)
	}
	if m.dual {
		if m.stepIPv6(ctx) {
			return true
		}
		if !m.holdsIPv6() {
			// Every pod needs an address of the /80 as well: IPv4 growth would address none, and the round
			// would clear what stepIPv6 said of the /80 (the status and the Node condition must keep it).
			return false
		}
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
		m.lastFailure.set("")
		m.held.set("")
		switch {
		case c.Free() == 0 && c.Assigned() >= targets.MaxPods:
			m.resting.setBecause(api.PoolMaxPods, maxPodsReached(c.Assigned(), targets.MaxPods).Error())
		case d.AtLimit:
			m.resting.setBecause(api.PoolENILimit, m.atLimitNote(targets, c))
		default:
			m.resting.set("")
			m.pause.calm()
		}
		return false
	}
	m.resting.set("")
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
		if m.refusals.pausedAt(actionUnassign, now) {
			return false
		}
		var errs []error
		for id, ips := range releasable {
			err := m.eni.UnassignIPs(ctx, id, ips)
			if err == nil {
				m.refusals.accepted(actionUnassign)
				continue
			}
			// A refusal pauses the release alone (IAM included: growth goes on); the IPs stay in the pool.
			if until := m.refuseIfDue(actionUnassign, err); !until.IsZero() {
				m.wakeAt(ctx, until)
				continue
			}
			errs = append(errs, err)
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

// assignWhatFits asks again, at once, for as many of the n IPs as the subnet still has, after it refused all n
// for want of addresses while pods wait for IPs (growth sized for them may ask for more than a nearly full
// subnet holds, and a refusal pauses the pool for a minute while the waiting pod's address is free there). It reports
// whether that assign succeeded. Single IPs only: a subnet's count of free addresses says nothing of free
// /28s, and prefix mode falls back to single IPs on its own.
func (m *poolManager) assignWhatFits(ctx context.Context, eniID, subnetID string, n int) bool {
	// Only for pods that wait: growth toward a warm target alone can wait out the pause, and a read of the
	// subnet per refusal would add a DescribeSubnets to every backoff round of a full subnet.
	if n <= 1 || m.waiting == nil || m.waiting(m.clock.Now()) == 0 {
		return false
	}
	fits := min(n-1, m.place.FreeAddresses(ctx, subnetID))
	if fits <= 0 {
		return false
	}
	if err := m.eni.AssignIPs(ctx, eniID, fits); err != nil {
		m.log.Warn("assigning what the subnet still holds failed", "eni", eniID, "subnet", subnetID, "ips", fits, "error", err)
		return false
	}
	m.log.Info("the subnet held fewer addresses than the growth asked for; assigned what it holds", "eni", eniID,
		"subnet", subnetID, "asked", n, "assigned", fits)
	m.refusals.accepted(actionAssign)
	return true
}

// atLimitNote is the status line while the pool (c) is short but may not add an ENI: what holds the slots.
func (m *poolManager) atLimitNote(t pool.Targets, c pool.Counts) string {
	s := "short of IPs but at the ENI limit"
	if f := m.foreignNote(); f != "" {
		s += ": " + f
	}
	if n := c.SingleSlots(); t.Prefixes && n > 0 {
		slots := fmt.Sprintf("%d slots hold", n)
		if n == 1 {
			slots = "1 slot holds"
		}
		s += fmt.Sprintf("; %s single IPs, so the node can address %d pods, not max pods %d, "+
			"until their pods go and each slot takes a /28 prefix", slots, c.Total(), t.MaxPods)
	}
	return s + "; more IPs need a larger instance type, ENABLE_PREFIX_DELEGATION, or MAX_ENI raised if it is set"
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
	held := false
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
				if m.refusals.pausedAt(actionAssign, now) {
					held = true
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
				if m.refusals.pausedAt(actionCreate, now) || m.refusals.pausedAt(actionAttach, now) {
					held = true
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
	if held && len(adds) == 0 && len(plans) == 0 {
		m.held.set(m.refusals.status())
	} else {
		m.held.set("")
	}
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
				switch kind := refusalOf(err); {
				case kind == kindNoPrefix:
					// It pauses no growth, so eniwire_ec2_refusals_total does not count it;
					// eniwire_prefix_fallback says it.
					m.fallback.refused(a.subnet, m.clock.Now(), err)
					done(true, nil) // decide again: the deficit comes as single IPs
				case kind == kindUnauthorized && a.primary:
					m.closeIfRefused(a.eni, err)
					done(true, nil) // decide again: the deficit goes to secondary ENIs
				case kind == kindSubnetFull && m.closeIfFull(ctx, a.eni, a.subnet, err):
					done(true, nil) // decide again: the deficit goes to a new ENI in another subnet
				case kind == kindSubnetFull && !prefixes && m.assignWhatFits(ctx, a.eni, a.subnet, a.n):
					done(true, nil)
				case !m.refuseIfDue(actionAssign, err).IsZero():
					done(false, nil)
				default:
					done(false, func() bool { return m.result(err, "assigning IPs") })
				}
				return
			}
			m.refusals.accepted(actionAssign)
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

// report puts the pool's settings and its prefix fallback at now into s.
func (m *poolManager) report(s *api.Status, now time.Time) {
	s.IPsPerENI, s.MaxPods, s.PrefixDelegation = m.limits.IPsPerENI, m.targets.MaxPods, m.targets.Prefixes
	s.PrefixFallback = m.fallback.status(now)
}
