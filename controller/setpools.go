package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/sgpool"
)

// setRefusalPause is how long a set waits after EC2 refused an ENI with its groups for good (a group that
// does not exist, more groups than an ENI takes): its ADDs fail at once meanwhile, naming the refusal, and
// no other set or pod waits with it.
const setRefusalPause = time.Minute

// stepSets is one round of the pod security-group sets' pools (sgpool.Decide), after the default pool's: a
// new ENI with the set's groups, more slots on one of its ENIs, or the release of one no pod has held for
// the release delay. A set no slot can serve is blocked until a round finds one; its ADDs fail at once. It
// reports whether it did something.
func (m *poolManager) stepSets(ctx context.Context) bool {
	if m.sets == nil {
		return false
	}
	now := m.clock.Now()
	demand := m.sets.Demand()
	for _, d := range demand {
		m.sets.Unblock(d.Set) // the no-slot blocks: this round says again whether they hold
	}
	limits, targets := m.limitsNow(), m.targetsAt(now)
	l := sgpool.Limits{Slots: targets.MaxENIsFor(limits), IPsPerENI: limits.IPsPerENI, Grain: targets.Grain()}
	var acts []sgpool.Action
	var full []sgpool.NoSlot
	m.books.View(func(st *journal.State) {
		acts, full = sgpool.Decide(st, pool.NewView(st, now), demand, l, &m.setIdle, m.releaseDelay, now)
	})
	for _, f := range full {
		if m.sets.Blocked(f.Demand.Set, now) == "" {
			m.log.Warn("no ENI slot for a pod security-group set", "set", f.Demand.Set, "policies", f.Demand.Policies,
				"waiting", f.Demand.Waiting, "slots", l.Slots)
		}
		m.sets.Block(f.Demand.Set, f.Why, time.Time{})
	}
	assign, plan := m.eni.AssignIPs, m.eni.Plan
	if l.Grain > 1 {
		assign, plan = m.eni.AssignPrefixes, m.eni.PlanPrefixes
	}
	growing := !m.pause.pausedAt(now) && !m.refusals.pausedAt(actionCreate, now) && !m.refusals.pausedAt(actionAttach, now)
	var did bool
	var errs []error
	for _, a := range acts {
		if a.Kind != sgpool.ReleaseENI && (!growing || m.sets.Blocked(a.Set, now) != "") {
			continue
		}
		switch a.Kind {
		case sgpool.NewENI:
			at, err := m.place.Place(ctx, a.Slots*l.Grain)
			if err != nil {
				errs = append(errs, fmt.Errorf("placing the ENI of security-group set %s: %w", a.Set, err))
				continue
			}
			at.SecurityGroups, at.GroupSet = a.Groups, a.Set
			op, err := plan(ctx, a.Slots, at)
			if err != nil {
				errs = append(errs, fmt.Errorf("planning the ENI of security-group set %s: %w", a.Set, err))
				continue
			}
			m.launch(ctx, op)
			did = true
		case sgpool.AddSlots:
			if err := assign(ctx, a.ENI, a.Slots); err != nil {
				errs = append(errs, fmt.Errorf("adding addresses for security-group set %s: %w", a.Set, err))
				continue
			}
			did = true
		case sgpool.ReleaseENI:
			op, err := m.eni.StartRelease(ctx, a.ENI)
			if errors.Is(err, eni.ErrBusy) {
				continue // a pod took one of its addresses meanwhile
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("releasing the ENI of security-group set %s: %w", a.Set, err))
				continue
			}
			m.log.Info("releasing the ENI of a pod security-group set: no pod held it", "set", a.Set, "eni", a.ENI,
				"after", m.releaseDelay)
			m.launch(ctx, op)
			did = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		m.result(err, "growing the pod security-group sets")
	}
	return did
}

// setRefused blocks the set of a planned ENI whose create EC2 refused for good (its plan is dropped): the
// refusal is the set's alone, so it pauses neither the default pool nor any other set.
func (m *poolManager) setRefused(rec journal.ENI, err error) {
	until := m.clock.Now().Add(setRefusalPause)
	m.log.Warn("EC2 refused an ENI with a pod security-group set; its pods' ADDs fail until the pause ends",
		"set", rec.GroupSet, "until", until, "error", err)
	m.sets.Block(rec.GroupSet, fmt.Sprintf("EC2 refused an ENI with these groups (%v); tried again after %s",
		err, until.UTC().Format(time.RFC3339)), until)
}
