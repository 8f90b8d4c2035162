package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// poolStep makes one change toward the warm targets and reports whether it did something (and may do more).
func (n *Node) poolStep(ctx context.Context) bool {
	now := n.clock.Now()
	if now.Before(n.poolUntil) {
		return false
	}
	var d pool.Decision
	var free int
	var withRoom map[string]int
	var releasable map[string][]string
	limits := n.limits
	limits.MaxENIs = n.eni.MaxENIs()
	n.View(func(st *journal.State) {
		v := pool.NewView(st, now)
		c := v.Counts()
		d = n.targets.Decide(limits, c)
		free = c.Free()
		withRoom = v.WithRoom(limits.IPsPerENI)
		if d.ReleaseIPs > 0 {
			releasable = v.Releasable(d.ReleaseIPs)
		}
	})
	if d.AddIPs == 0 && !d.NewENI && d.ReleaseIPs == 0 && d.ReleaseENI == "" {
		n.surplusSince = time.Time{}
		if d.AtLimit {
			n.setPoolState("short of IPs but at the ENI limit")
		} else if n.poolDelay > 0 || n.poolState != "" {
			n.poolDelay = 0
			n.setPoolState("")
		}
		return false
	}
	// Calls that unblock pods go first in the EC2 client's queue.
	if free == 0 && n.urgent != nil {
		ctx = n.urgent(ctx)
	}
	switch {
	case d.AddIPs > 0:
		n.surplusSince = time.Time{}
		ids := make([]string, 0, len(withRoom))
		for id := range withRoom {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		id := ids[0]
		err := n.eni.AssignIPs(ctx, id, min(d.AddIPs, withRoom[id]))
		return n.poolResult(err, "assigning IPs")
	case d.NewENI:
		n.surplusSince = time.Time{}
		op, err := n.eni.Plan(ctx, d.NewENIIPs)
		if err != nil {
			return n.poolResult(err, "planning ENI")
		}
		n.drive(ctx, op)
		rec, ok := n.eni.Record(op)
		return ok && rec.Usable()
	}
	// Surplus: release only after it has lasted the hysteresis delay.
	if n.surplusSince.IsZero() {
		n.surplusSince = now
		return false
	}
	if now.Sub(n.surplusSince) < n.cfg.ReleaseDelay {
		return false
	}
	if d.ReleaseIPs > 0 {
		var errs []error
		for id, ips := range releasable {
			errs = append(errs, n.eni.UnassignIPs(ctx, id, ips))
		}
		return n.poolResult(errors.Join(errs...), "releasing surplus IPs")
	}
	op, err := n.eni.StartRelease(ctx, d.ReleaseENI)
	if err != nil {
		return n.poolResult(err, "releasing ENI")
	}
	n.surplusSince = time.Time{}
	n.drive(ctx, op)
	return true
}

func (n *Node) poolResult(err error, what string) bool {
	if err == nil {
		return true
	}
	n.log.Warn("pool step failed", "step", what, "error", err)
	n.poolBackoff(err)
	if !n.clock.Now().Before(n.poolUntil) {
		// Not a capacity or IAM refusal: pause this round only.
		n.poolDelay = nextDelay(n.poolDelay/2, err)
		n.poolUntil = n.clock.Now().Add(min(n.poolDelay, n.cfg.PoolInterval))
	}
	n.setPoolStateIfEmpty(fmt.Sprintf("%s failed: %v", what, err))
	return false
}

func (n *Node) setPoolStateIfEmpty(s string) {
	n.poolMu.Lock()
	empty := n.poolState == ""
	n.poolMu.Unlock()
	if empty {
		n.setPoolState(s)
	}
}
