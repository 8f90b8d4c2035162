package controller

// The pool backs off per class of definite refusal: EC2 refusing a create or an assign for a reason that the
// same call will meet again (a security group or subnet that does not exist, a ClientToken replayed with
// other parameters, an address limit) pauses that kind of call across plans, exponentially per error code,
// instead of re-planning at once (310 refused creates in ten virtual minutes, each with two fsyncs, drained
// the account's bucket). Throttles, answers that never came, subnet exhaustion and IAM refusals of growth
// have their own handling (drive.go). An unassign EC2 refuses, IAM included, pauses the release of surplus
// IPs alone (63 denied calls in five minutes, each with a Describe, had kept the IPs out of the pool), and an
// attach that finds no free device index pauses new ENIs (foreignslots.go).

import (
	"errors"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
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

// refusal is when the pool may call an action again after EC2 refused it, and why.
type refusal struct {
	code  string
	until time.Time
	note  string // the status line, kept until EC2 accepts the action again
}

// definiteRefusal reports whether err is EC2 refusing the call for a reason a retry will not fix by itself.
func definiteRefusal(err error) bool {
	return ec2client.ErrorCode(err) != "" && !errors.Is(err, ec2client.ErrTransient) && !ec2client.IsThrottle(err) &&
		!errors.Is(err, ec2client.ErrSubnetFull) && !errors.Is(err, ec2client.ErrUnauthorized) &&
		!errors.Is(err, ec2client.ErrNoPrefix)
}

// noteRefusal pauses action after err if err is a definite refusal, and reports whether it was one. The
// pause grows per error code, from 5 s to 5 min, and the status and eniwire_ec2_refusals_total say why.
func (m *poolManager) noteRefusal(action string, err error) bool {
	if !definiteRefusal(err) {
		return false
	}
	code := ec2client.ErrorCode(err)
	m.refuse(action, code, fmt.Sprintf("EC2 refuses %s (%s): %v", action, code, err))
	return true
}

// unassignRefused pauses the release of surplus IPs if err is EC2 refusing an unassign (IAM included: only
// the release waits, growth does not), and reports whether it was one.
func (m *poolManager) unassignRefused(err error) bool {
	code := ec2client.ErrorCode(err)
	if code == "" || errors.Is(err, ec2client.ErrTransient) || ec2client.IsThrottle(err) {
		return false
	}
	why := fmt.Sprintf("EC2 refuses %s (%s): %v; the surplus IPs stay in the pool", actionUnassign, code, err)
	if errors.Is(err, ec2client.ErrUnauthorized) {
		why += "; check the node's IAM policy"
	}
	m.refuse(actionUnassign, code, why)
	return true
}

// refuse pauses action for a refusal with code (an EC2 error code, or the node's own name for a refusal it
// meets before EC2 could, such as codeNoDeviceIndex): the pause grows per code, from 5 s to 5 min; the status
// says why and until when, and eniwire_ec2_refusals_total counts it.
func (m *poolManager) refuse(action, code, why string) {
	m.mu.Lock()
	d := max(nextDelay(m.refusalDelay[code], nil), 5*time.Second)
	m.refusalDelay[code] = d
	until := m.clock.Now().Add(d)
	note := fmt.Sprintf("%s; backing off until %s", why, until.UTC().Format(time.RFC3339))
	m.refused[action] = refusal{code: code, until: until, note: note}
	m.mu.Unlock()
	m.metrics.refusals.WithLabelValues(action, code).Inc()
	m.status.set(note)
}

// refusedNow reports whether action is paused by a refusal at now.
func (m *poolManager) refusedNow(action string, now time.Time) bool {
	return now.Before(m.refusalEnd(action))
}

// accepted clears the pause of action, and the growth of its codes' delays, once EC2 accepted it.
func (m *poolManager) accepted(action string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.refused[action]; ok {
		delete(m.refusalDelay, r.code)
		delete(m.refused, action)
	}
}

// refusalEnd returns when the pause of action ends (the zero time when it is not paused).
func (m *poolManager) refusalEnd(action string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[action].until
}
