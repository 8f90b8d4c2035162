package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// waitForIP picks a free IP (and in dual-stack mode an IPv6 beside it) for the ADD of turn t, waiting for one while the pool refills (or, before EC2's
// first answer, while the node gets ready). It is called with the books' lock held and returns with it held
// when it found an IP, released when it returns an error:
//   - the pods hold max pods' worth of IPs: ErrMaxPods at once;
//   - the node cannot get an IP soon (its IPs at max pods, the ENI limit, a full subnet, EC2 refusing): ErrNoIP
//     at once, naming the cause and its fix (noIPNow);
//   - else it waits in line (addLine: first come, first served) until an IP is free for it, a DEL of the
//     attachment supersedes it (errSuperseded), ctx ends, or addWait passes (ErrNoIP naming ENIWIRE_ADD_WAIT).
func (p *ipam) waitForIP(ctx context.Context, t *turn) (now time.Time, view *pool.View, ip, ipv6 string, e *journal.ENI, err error) {
	var w *addWaiter
	var deadline <-chan time.Time
	for {
		now = p.clock.Now()
		view = pool.NewView(p.books.st, now)
		ready, why := p.ready()
		if !ready && p.books.Broken() != nil {
			p.line.leave(w)
			p.books.mu.Unlock()
			return now, nil, "", "", nil, fmt.Errorf("%w: %s", ErrNotReady, why)
		}
		// Until EC2 has answered once, the books may not match it: the ADD waits its turn like one behind.
		behind := p.line.behind(w) || !ready
		if !behind {
			var ok bool
			if ip, ipv6, e, ok = p.pick(view); ok {
				p.line.leave(w)
				return now, view, ip, ipv6, e, nil
			}
		}
		// Behind others, an ADD waits its turn: the one at the head learns first whether an IP can come, and
		// pokes the next when it leaves.
		if !behind {
			err = p.noIPNow(view.Counts(), now)
		}
		if err != nil || p.addWait < 0 {
			p.line.leave(w)
			p.books.mu.Unlock()
			// Only a pod the pool could grow for is demand: one it cannot serve would hold its growth sized
			// for pods that will not come (a repack at the ENI limit, say).
			if err == nil {
				p.line.answeredNoIP(now)
				err = fmt.Errorf("%w: the pool is refilling", ErrNoIP)
				p.wake()
			}
			p.metrics.assigns.WithLabelValues(assignOutcome(err)).Inc()
			return now, nil, "", "", nil, err
		}
		joining := w == nil
		if joining {
			w = p.line.join()
			deadline = p.clock.After(p.addWait)
		}
		p.books.mu.Unlock()
		if joining {
			// Once: the Run loop pokes the head after each round, and a wake per poke would spin it.
			p.wake()
		}
		select {
		case <-w.poke:
			p.books.mu.Lock()
			continue
		case <-ctx.Done():
			err = ctx.Err()
			if t.superseded.Load() {
				err = errSuperseded
			}
			err = fmt.Errorf("waiting for an IP: %w", err)
		case <-deadline:
			err = fmt.Errorf("%w: none came within ENIWIRE_ADD_WAIT (%s)", ErrNoIP, p.addWait)
			if ok, why := p.ready(); !ok {
				err = fmt.Errorf("%w: %s, for ENIWIRE_ADD_WAIT (%s)", ErrNotReady, why, p.addWait)
			} else if why := p.poolStatus(); why != "" {
				err = fmt.Errorf("%w; pool: %s", err, why)
			}
		}
		p.line.leave(w)
		if errors.Is(err, errSuperseded) {
			// Its pod's DEL came: nobody will retry this ADD, so it is no demand the pool should grow for.
			p.metrics.assigns.WithLabelValues("error").Inc()
			return now, nil, "", "", nil, err
		}
		p.line.answeredNoIP(p.clock.Now())
		p.metrics.assigns.WithLabelValues("no_ip").Inc()
		return now, nil, "", "", nil, err
	}
}

// noIPNow is the answer to an ADD that finds no free IP when the node cannot get one soon, naming the cause
// and what fixes it; nil while the pool can still bring one. Called with the books' lock held.
func (p *ipam) noIPNow(c pool.Counts, now time.Time) error {
	if assigned := len(p.books.st.Assignments); assigned >= p.targets.MaxPods {
		return fmt.Errorf("%w; raise MAX_PODS (and kubelet's --max-pods) only if the ENIs can address more",
			maxPodsReached(assigned, p.targets.MaxPods))
	}
	// IPs that are neither assigned nor cooling down are landing (their ENI not up yet): they are worth a wait.
	if limit := p.targets.MaxPodsFor(p.limits); c.Total() >= limit && c.Free() <= 0 {
		cooling := 0
		for _, e := range c.ENIs {
			cooling += e.Cooldown
		}
		return fmt.Errorf("%w: the node holds as many IPs as its max pods (%d), %d of them released and back "+
			"after IP_COOLDOWN_PERIOD (%s)", ErrNoIP, limit, cooling, p.cooldown)
	}
	if why := p.blocked(now); why != "" {
		return fmt.Errorf("%w: the node cannot get one now: %s", ErrNoIP, why)
	}
	return nil
}

// assignOutcome is the eniwire_assigns_total outcome of an ADD answered err for want of an IP.
func assignOutcome(err error) string {
	if errors.Is(err, ErrMaxPods) {
		return "max_pods"
	}
	return "no_ip"
}
