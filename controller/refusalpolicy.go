package controller

// One refusal policy for the pool: every error an EC2 call of the pool returns falls in one kind, and a table
// says what the pool does after each kind: which pause it starts (the refused action's, the whole pool's, or
// only the operation's own retry), the bounds of that pause, and the words of the status. grow (assigns and
// plans), drive (the steps of ENI operations) and the release of surplus IPs all ask it, so a kind is handled
// the same wherever it meets the pool.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/subnet"
)

// refusalKind is the class of an EC2 call's failure that decides the pool's answer.
type refusalKind int

const (
	// kindFailure: no answer, a server error, or a client error the node cannot tell apart; retried.
	kindFailure refusalKind = iota
	// kindThrottle: the account's bucket is dry; retried soon (see maxThrottleDelay).
	kindThrottle
	// kindNoPrefix: a fragmented subnet has no free /28; growth goes on in single IPs (prefixfallback.go).
	kindNoPrefix
	// kindSubnetFull: the subnet has no free addresses; the next candidate subnet, else the pool waits.
	kindSubnetFull
	// kindUnauthorized: IAM denies the call; an untagged primary is closed (closed.go), else the pool waits.
	kindUnauthorized
	// kindNoPlacement: no subnet for a new ENI (a missing ENIConfig, one in another zone); the pool waits.
	kindNoPlacement
	// kindNoDeviceIndex: an attach found no free device index; new ENIs wait (foreignslots.go).
	kindNoDeviceIndex
	// kindDefinite: any other refusal a retry will not fix by itself; the refused action waits (refusals.go).
	kindDefinite
)

// refusalOf is the kind of err. The kinds do not overlap: each sentinel of the ENI manager is one kind, and a
// definite refusal is a refusal with an EC2 code that is none of the others.
func refusalOf(err error) refusalKind {
	switch {
	case errors.Is(err, ec2client.ErrNoPrefix):
		return kindNoPrefix
	case errors.Is(err, ec2client.ErrSubnetFull):
		return kindSubnetFull
	case errors.Is(err, ec2client.ErrUnauthorized):
		return kindUnauthorized
	case errors.Is(err, subnet.ErrNoPlacement):
		return kindNoPlacement
	case errors.Is(err, eni.ErrNoDeviceIndex):
		return kindNoDeviceIndex
	case ec2client.IsThrottle(err):
		return kindThrottle
	case ec2client.ErrorCode(err) == "" || errors.Is(err, ec2client.ErrTransient):
		return kindFailure
	}
	return kindDefinite
}

// refusalOutcome is what the pool does after one kind of refusal.
type refusalOutcome struct {
	// pauses are the actions that wait after a refusal of theirs of this kind, across plans, until the pause
	// ends (refusalMemory, within refusalBounds); the pause grows per error code while EC2 keeps refusing. A
	// refusal of any other action is retried (a step of an ENI operation after its own backoff).
	pauses []string
	// pausesPool: all growth waits (poolPause) within pause, and eniwire_pool_backoffs_total counts it.
	pausesPool bool
	pause      backoffBounds
	// retry bounds the failed operation's own retry.
	retry backoffBounds
	// why is the status's words for the refusal (of action, in subnetID, with err); nil where the pool
	// says nothing. reason names them (api.Pool*).
	why    func(action, subnetID string, err error) string
	reason string
}

// retryBounds bound the retry of a failed step: from 1 s to 5 min.
var retryBounds = backoffBounds{floor: time.Second, ceiling: 5 * time.Minute}

// capacityBounds bound the wait after a refusal a storm would not fix (IAM, a full subnet): from 1 min.
var capacityBounds = backoffBounds{floor: time.Minute, ceiling: 5 * time.Minute}

// refusalPolicy is the outcome of every kind: grow, drive and the release of surplus IPs ask it.
var refusalPolicy = map[refusalKind]refusalOutcome{
	kindFailure:  {retry: retryBounds},
	kindThrottle: {retry: backoffBounds{floor: time.Second, ceiling: maxThrottleDelay, fullJitter: true}},
	// The fallback keeps its own retry bounds per subnet (minPrefixRetry, maxPrefixRetry) and its own status
	// line; it pauses no growth.
	kindNoPrefix: {pauses: []string{actionUnassign}, retry: retryBounds},
	kindSubnetFull: {pauses: []string{actionUnassign}, pausesPool: true, pause: capacityBounds, retry: capacityBounds,
		reason: api.PoolSubnetExhausted, why: func(_, subnetID string, err error) string {
			return "subnet " + subnetID + " has no free addresses (" + ec2client.ErrorCode(err) + "): free some, or tag " +
				"another subnet of the zone kubernetes.io/role/cni=1 (ENABLE_SUBNET_DISCOVERY)"
		}},
	kindUnauthorized: {pauses: []string{actionUnassign}, pausesPool: true, pause: capacityBounds, retry: capacityBounds,
		reason: api.PoolUnauthorized, why: func(string, string, error) string {
			return "EC2 denies the calls (UnauthorizedOperation): check the node's IAM policy"
		}},
	// Mostly a local check (an ENIConfig still missing or in another zone): a fix should not wait long.
	kindNoPlacement: {pausesPool: true, pause: placementBounds, retry: placementBounds, reason: api.PoolNoSubnet,
		why: func(_, _ string, err error) string { return err.Error() }},
	// Met by an attach only: new ENIs wait, since an attach is where a create ends.
	kindNoDeviceIndex: {pauses: []string{actionAttach}, retry: retryBounds, reason: api.PoolNoDeviceIndex,
		why: func(_, _ string, err error) string { return fmt.Sprintf("no free device index for a new ENI: %v", err) }},
	kindDefinite: {pauses: []string{actionCreate, actionAssign, actionUnassign}, retry: retryBounds, reason: api.PoolEC2Refusing,
		why: func(action, _ string, err error) string {
			return fmt.Sprintf("EC2 refuses %s (%s): %v", action, ec2client.ErrorCode(err), err)
		}},
}

// placementBounds bound the wait while no subnet takes a new ENI: from 1 s to 30 s.
var placementBounds = backoffBounds{floor: time.Second, ceiling: 30 * time.Second}

// refusalBounds are the bounds of an action's pause after a refusal: from 5 s (minRefusalPause) to 5 min.
var refusalBounds = backoffBounds{floor: time.Second, ceiling: 5 * time.Minute, least: minRefusalPause}

// minRefusalPause is the shortest pause of a refused action.
const minRefusalPause = 5 * time.Second

// backoffBounds bound a delay that doubles while failures go on.
type backoffBounds struct {
	floor, ceiling time.Duration
	// least, when set, is the shortest delay returned (after the jitter).
	least time.Duration
	// fullJitter draws the wait from the whole window rather than adding up to a fifth to it.
	fullJitter bool
}

// next grows prev within the bounds and returns the new window and the wait drawn from it: doubled, at
// least floor, at most ceiling; the wait is the window plus up to a fifth (or, with fullJitter, anything in
// the window, so that nodes throttled together come back spread over it).
func (b backoffBounds) next(prev time.Duration) (window, wait time.Duration) {
	window = min(max(prev*2, b.floor), b.ceiling)
	if b.fullJitter {
		return window, time.Duration(rand.Int64N(int64(window)))
	}
	wait = max(window+time.Duration(rand.Int64N(int64(window)/5+1)), b.least)
	return wait, wait
}

// maxThrottleDelay caps the node's wait before retrying a step that EC2 kept throttling. A throttle is not a
// failure of the step: the account's bucket refills every second, and the EC2 client's limiter already paces
// the node (its rate is cut, its own retries are spent). Growing this wait to minutes, as for real failures,
// left the last ENIs of a 1,000-node rollout idle while the account's bucket sat full.
const maxThrottleDelay = 15 * time.Second

// refuseIfDue pauses action if refusalPolicy says that err, its refusal, pauses it, and returns when the pause
// ends (the zero time when it does not).
func (m *poolManager) refuseIfDue(action string, err error) time.Time {
	kind := refusalOf(err)
	o := refusalPolicy[kind]
	if !slices.Contains(o.pauses, action) {
		return time.Time{}
	}
	code := refusalCode(err)
	var why string
	switch {
	case action == actionUnassign:
		// The release's own words: growth goes on, only the surplus IPs stay.
		why = fmt.Sprintf("EC2 refuses %s (%s): %v; the surplus IPs stay in the pool", action, code, err)
		if kind == kindUnauthorized {
			why += "; check the node's IAM policy"
		}
	case kind == kindNoDeviceIndex:
		why = o.why(action, "", err)
		if f := m.foreignNote(); f != "" {
			why += "; " + f
		}
	default:
		why = o.why(action, "", err)
	}
	return m.refusals.refuse(action, code, reasonOf(err), why, refusalBounds)
}

// refusalCode is err's EC2 error code, or the node's own name for a refusal it meets before EC2 could
// (codeNoDeviceIndex).
func refusalCode(err error) string {
	if refusalOf(err) == kindNoDeviceIndex {
		return codeNoDeviceIndex
	}
	return ec2client.ErrorCode(err)
}

// pausePoolIfDue pauses all growth if err, from a call in subnetID ("": the node's own), is of a kind that
// refusalPolicy says pauses the pool.
func (m *poolManager) pausePoolIfDue(err error, subnetID string) {
	o := refusalPolicy[refusalOf(err)]
	if !o.pausesPool {
		return
	}
	if subnetID == "" {
		subnetID = m.subnetID
	}
	m.pause.pause(reasonOf(err), o.why("", subnetID, err), o.pause)
}

// reasonOf is the status's reason for err (api.Pool*): its kind's, except that no candidate subnet left for
// want of addresses (subnet discovery after the only subnet refused) is the subnet's exhaustion.
func reasonOf(err error) string {
	if errors.Is(err, subnet.ErrNoSubnet) {
		return api.PoolSubnetExhausted
	}
	return refusalPolicy[refusalOf(err)].reason
}

// result answers the outcome of one of the round's steps (what), and reports whether it succeeded. A failure
// pauses the pool as refusalPolicy says, or else this round only.
func (m *poolManager) result(err error, what string) bool {
	if err == nil {
		return true
	}
	m.log.Warn("pool step failed", "step", what, "error", err)
	m.pausePoolIfDue(err, "")
	m.pause.roundFailed(m.poolInterval)
	m.lastFailure.setBecause(api.PoolGrowthFailing, fmt.Sprintf("%s failed: %v", what, err))
	return false
}
