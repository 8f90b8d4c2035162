package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pod churn: every podTick, podRatePerNode x nodes x podTick pods are created on random live nodes, each living
// a uniform podLifeMin..podLifeMax; a pod that finds no free IP retries (as kubelet does) up to podPatience.
const (
	podTick        = 250 * time.Millisecond
	podRatePerNode = 0.2 // pods per node per second: about 8 running per node
	podLifeMin     = 20 * time.Second
	podLifeMax     = 60 * time.Second
	podPatience    = 30 * time.Second
)

type pod struct {
	name   string
	s      *slot
	ip     string
	since  time.Duration
	ending time.Duration
}

// podDriver creates and deletes pods, and checks that no IP is ever held by two running pods.
type podDriver struct {
	f       *fleet
	seq     int
	carry   float64
	pending []*pod
	running map[string]*pod
	byIP    map[string]*pod
	stats   podStats
}

func newPodDriver(f *fleet) *podDriver {
	return &podDriver{f: f, running: map[string]*pod{}, byIP: map[string]*pod{}}
}

func (d *podDriver) tick(ctx context.Context) {
	now := d.f.now()
	for name, p := range d.running {
		if now >= p.ending {
			d.stop(ctx, name, p)
		}
	}
	live := d.f.liveSlots()
	d.carry += podRatePerNode * float64(len(live)) * podTick.Seconds()
	for ; d.carry >= 1 && len(live) > 0; d.carry-- {
		d.seq++
		d.f.mu.Lock()
		s := live[d.f.rng.IntN(len(live))]
		life := podLifeMin + time.Duration(d.f.rng.Int64N(int64(podLifeMax-podLifeMin)))
		d.f.mu.Unlock()
		d.pending = append(d.pending, &pod{name: fmt.Sprintf("pod-%07d", d.seq), s: s, since: now, ending: life})
	}
	waiting := d.pending[:0]
	for _, p := range d.pending {
		if !p.s.live {
			continue
		}
		ip, err := p.s.m.assign(ctx, p.name)
		switch {
		case err == nil:
			d.stats.started++
			if other, dup := d.byIP[ip]; dup {
				d.stats.dups++
				d.f.progress("duplicate IP %s: %s and %s", ip, other.name, p.name)
			}
			p.ip, p.ending = ip, now+p.ending
			d.byIP[ip] = p
			d.running[p.name] = p
		case (errors.Is(err, errNoIP) || errors.Is(err, errNotReady)) && now-p.since < podPatience:
			waiting = append(waiting, p)
		default:
			d.stats.failed++
		}
	}
	d.pending = waiting
}

func (d *podDriver) stop(ctx context.Context, name string, p *pod) {
	_ = p.s.m.release(ctx, name)
	delete(d.running, name)
	if d.byIP[p.ip] == p {
		delete(d.byIP, p.ip)
	}
}

// dropNode forgets the pods of a node that leaves (they die with it).
func (d *podDriver) dropNode(s *slot) {
	for name, p := range d.running {
		if p.s == s {
			delete(d.running, name)
			if d.byIP[p.ip] == p {
				delete(d.byIP, p.ip)
			}
		}
	}
}

func (d *podDriver) releaseAll(ctx context.Context) {
	for name, p := range d.running {
		d.stop(ctx, name, p)
	}
	d.stats.failed += len(d.pending)
	d.pending = nil
}
