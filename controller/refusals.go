package controller

// The pool backs off per class of definite refusal: EC2 refusing a create or an assign for a reason that the
// same call will meet again (a security group or subnet that does not exist, a ClientToken replayed with
// other parameters, an address limit) pauses that kind of call across plans, exponentially per error code,
// instead of re-planning at once (310 refused creates in ten virtual minutes, each with two fsyncs, drained
// the account's bucket). Throttles, answers that never came, subnet exhaustion and IAM refusals of growth
// have their own handling (refusalpolicy.go). An unassign EC2 refuses, IAM included, pauses the release of
// surplus IPs alone (63 denied calls in five minutes, each with a Describe, had kept the IPs out of the pool),
// and an attach that finds no free device index pauses new ENIs (foreignslots.go).

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/internal/clock"
)

// Actions whose definite refusals pause the pool's growth.
const (
	actionCreate = "CreateNetworkInterface"
	actionAssign = "AssignPrivateIpAddresses"
	// actionAttach is paused when an attach found no free device index (codeNoDeviceIndex): growth plans
	// no new ENI meanwhile.
	actionAttach = "AttachNetworkInterface"
	// actionUnassign is paused when EC2 refuses to take surplus IPs back: they stay in the pool meanwhile.
	actionUnassign = "UnassignPrivateIpAddresses"
)

// refusedActions is the order in which the status names the actions that wait.
var refusedActions = []string{actionCreate, actionAssign, actionAttach, actionUnassign}

// refusal is when the pool may call an action again after EC2 refused it, and why.
type refusal struct {
	code  string
	until time.Time
	note  string // the status line, kept until EC2 accepts the action again
	// reason names note (api.Pool*).
	reason string
}

// refusalMemory remembers, per action, the last refusal EC2 has not taken back by accepting the action since,
// and per error code the pause that grows while EC2 keeps refusing. Who may touch it: any goroutine (the
// assigns of a round and the drives run side by side), under its own lock.
type refusalMemory struct {
	clock   clock.Clock
	counted *prometheus.CounterVec // eniwire_ec2_refusals_total by action and code

	mu      sync.Mutex
	refused map[string]refusal
	delay   map[string]time.Duration
}

func newRefusalMemory(clk clock.Clock, counted *prometheus.CounterVec) *refusalMemory {
	return &refusalMemory{clock: clk, counted: counted, refused: map[string]refusal{}, delay: map[string]time.Duration{}}
}

// refuse pauses action for a refusal with code (an EC2 error code, or the node's own name for a refusal it
// meets before EC2 could, such as codeNoDeviceIndex) within bounds, growing per code; the status says why
// and until when (reason names it, api.Pool*), and eniwire_ec2_refusals_total counts it. It returns when the
// pause ends.
func (r *refusalMemory) refuse(action, code, reason, why string, bounds backoffBounds) time.Time {
	r.mu.Lock()
	d, _ := bounds.next(r.delay[code])
	r.delay[code] = d
	until := r.clock.Now().Add(d)
	r.refused[action] = refusal{code: code, until: until, note: backingOff(why, until), reason: reason}
	r.mu.Unlock()
	r.counted.WithLabelValues(action, code).Inc()
	return until
}

// pausedAt reports whether action is paused by a refusal at now.
func (r *refusalMemory) pausedAt(action string, now time.Time) bool { return now.Before(r.end(action)) }

// end returns when the pause of action ends (the zero time when it is not paused).
func (r *refusalMemory) end(action string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[action].until
}

// accepted clears the pause of action, and the growth of its code's delays, once EC2 accepted it.
func (r *refusalMemory) accepted(action string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.refused[action]; ok {
		delete(r.delay, f.code)
		delete(r.refused, action)
	}
}

// status is the line of the first action (in refusedActions' order) EC2 has refused and not accepted since,
// or "".
func (r *refusalMemory) status() string {
	_, s := r.because()
	return s
}

// because is status with its reason.
func (r *refusalMemory) because() (reason, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range refusedActions {
		if f, ok := r.refused[a]; ok {
			return f.reason, f.note
		}
	}
	return "", ""
}
