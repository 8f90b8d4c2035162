package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/internal/clock"
)

// Bounds of the wait between two tries of a pod's datapath setup that failed.
const (
	minRepairDelay = time.Second
	maxRepairDelay = time.Minute
)

// podRepair sets the datapath of assigned pods up again: every pod when the node starts (the books replayed
// into a datapath that may have lost them), the pods of an ENI whose interface came back (a re-attached ENI
// is a new netdev: the pods' entries point at the old one), and each pod whose setup failed, tried again with
// backoff until it works or the pod is released. Who may touch it: only the Run loop.
type podRepair struct {
	ipam  *ipam
	clock clock.Clock
	log   *slog.Logger

	due map[api.Attachment]*repairTry
}

// repairTry is when a pod's setup is tried next, and how long the wait after a failure is.
type repairTry struct {
	next  time.Time
	delay time.Duration
}

// all marks every assigned pod for setup.
func (r *podRepair) all() {
	for _, a := range r.ipam.Assignments() {
		r.mark(a.Attachment)
	}
}

// eniUp marks the pods of an ENI whose datapath was just brought up.
func (r *podRepair) eniUp(eniID string) {
	for _, a := range r.ipam.Assignments() {
		if a.ENI == eniID {
			r.mark(a.Attachment)
		}
	}
}

// mark makes a pod's setup due now.
func (r *podRepair) mark(att api.Attachment) {
	if t := r.due[att]; t != nil {
		t.next = time.Time{}
		return
	}
	r.due[att] = &repairTry{}
}

// run sets up every pod whose try is due; a failure waits twice as long as the last, up to maxRepairDelay.
func (r *podRepair) run(ctx context.Context) {
	for att, t := range r.due {
		if ctx.Err() != nil {
			return
		}
		now := r.clock.Now()
		if now.Before(t.next) {
			continue
		}
		ip, err := r.ipam.podUpAgain(ctx, att)
		switch {
		case err == nil:
			if t.delay > 0 {
				r.log.Info("pod datapath set up after failures", "container", att.ContainerID, "ifname", att.IfName, "ip", ip)
			}
			delete(r.due, att)
		default:
			if t.delay == 0 {
				r.log.Warn("setting up pod datapath; retrying with backoff", "container", att.ContainerID,
					"ifname", att.IfName, "ip", ip, "error", err)
			}
			t.delay = min(max(2*t.delay, minRepairDelay), maxRepairDelay)
			t.next = now.Add(t.delay)
		}
	}
}
