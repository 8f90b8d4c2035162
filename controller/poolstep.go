package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// poolStep makes one change toward the warm targets and reports whether it did something (and may do more).
func (n *Node) poolStep(ctx context.Context) bool {
	now := n.clock.Now()
	n.backoffMu.Lock()
	until := n.poolUntil
	n.backoffMu.Unlock()
	if now.Before(until) {
		return false
	}
	var d pool.Decision
	var free int
	var releasable map[string][]string
	limits := n.limits
	limits.MaxENIs = n.eni.MaxENIs()
	n.View(func(st *journal.State) {
		v := pool.NewView(st, now)
		c := v.Counts()
		d = n.targets.Decide(limits, c)
		free = c.Free()
		if d.ReleaseIPs > 0 {
			releasable = v.Releasable(d.ReleaseIPs)
		}
	})
	if d.AddIPs == 0 && !d.NewENI && d.ReleaseIPs == 0 && d.ReleaseENI == "" {
		n.surplusSince = time.Time{}
		if d.AtLimit {
			n.setPoolState("short of IPs but at the ENI limit")
		} else {
			n.backoffMu.Lock()
			n.poolDelay = 0
			n.backoffMu.Unlock()
			n.setPoolState("")
		}
		return false
	}
	// Calls that unblock pods go first in the EC2 client's queue.
	if free == 0 && n.urgent != nil {
		ctx = n.urgent(ctx)
	}
	if d.AddIPs > 0 || d.NewENI {
		n.surplusSince = time.Time{}
		return n.grow(ctx, limits, now)
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
	n.backoffMu.Lock()
	if !n.clock.Now().Before(n.poolUntil) {
		// Not a capacity or IAM refusal: pause this round only.
		n.poolDelay = nextDelay(n.poolDelay/2, err)
		n.poolUntil = n.clock.Now().Add(min(n.poolDelay, n.cfg.PoolInterval))
	}
	n.backoffMu.Unlock()
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

// grow closes the whole deficit in one round: it asks the arithmetic again and again, counting each answer as
// in flight (IPs on ENIs with room, with the full count per ENI in one call; new ENIs with their IPs in the
// create), then runs all of it at once. Each new ENI is its own journaled commit with its own ClientToken;
// their device indexes are reserved in the books. It reports whether anything succeeded, so the pool
// manager looks again at once.
func (n *Node) grow(ctx context.Context, limits pool.Limits, now time.Time) bool {
	type addIPs struct {
		eni string
		n   int
	}
	var adds []addIPs
	var plans []int
	n.View(func(st *journal.State) {
		c := pool.NewView(st, now).Counts()
		for range 4 * (limits.MaxENIs + 1) {
			d := n.targets.Decide(limits, c)
			if d.AddIPs > 0 {
				i := slices.IndexFunc(c.ENIs, func(e pool.ENICount) bool { return e.IPs < limits.IPsPerENI })
				if i < 0 {
					break
				}
				k := min(d.AddIPs, limits.IPsPerENI-c.ENIs[i].IPs)
				adds = append(adds, addIPs{c.ENIs[i].ID, k})
				c.ENIs[i].IPs += k
				continue
			}
			if d.NewENI {
				plans = append(plans, d.NewENIIPs)
				c.PendingENIs++
				c.PendingIPs += d.NewENIIPs
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
	for _, a := range adds {
		wg.Go(func() {
			if err := n.eni.AssignIPs(ctx, a.eni, a.n); err != nil {
				done(false, func() bool { return n.poolResult(err, "assigning IPs") })
				return
			}
			done(true, nil)
		})
	}
	for _, want := range plans {
		wg.Go(func() {
			op, err := n.eni.Plan(ctx, want)
			if err != nil {
				done(false, func() bool { return n.poolResult(err, "planning ENI") })
				return
			}
			n.drive(ctx, op)
			rec, ok := n.eni.Record(op)
			done(ok && rec.Usable(), nil)
		})
	}
	wg.Wait()
	for _, f := range failures {
		f()
	}
	return progress
}
