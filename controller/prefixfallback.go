package controller

// A subnet can have free addresses but no free aligned /28 (single IPs of other nodes scattered across it):
// EC2 then refuses prefixes with InsufficientCidrBlocks. The AWS VPC CNI pauses all growth for 120 s and tries
// the same prefix call again; Cilium falls back to single IPs for good. eniwire grows with single IPs on the
// same ENIs at once, so pods keep starting, and tries prefixes again after a backoff that doubles from
// minPrefixRetry to maxPrefixRetry while the subnet keeps refusing: never off for good, never a storm.

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of the wait before prefixes are tried again after InsufficientCidrBlocks.
const (
	minPrefixRetry = time.Minute
	maxPrefixRetry = 30 * time.Minute
)

// prefixFallback is, per subnet that refused a prefix, whether the node grows with single IPs and when it
// tries prefixes there again. The node's growth uses single IPs while any subnet's fallback holds; the log,
// the status and the advice (a CIDR reservation) name the subnet that refused. Who may touch it: any
// goroutine, under its own lock.
type prefixFallback struct {
	// subnetID is the node's own subnet: a refusal whose subnet is not known is counted there.
	subnetID string
	log      *slog.Logger
	gauge    prometheus.Gauge

	mu      sync.Mutex
	subnets map[string]*subnetFallback
}

// subnetFallback is one subnet's fallback: on since since, prefixes tried again at retryAt.
type subnetFallback struct {
	on      bool
	since   time.Time
	retryAt time.Time
	delay   time.Duration
}

// active reports whether growth uses single IPs at now: some subnet's fallback holds. Once a subnet's retry
// time has come it no longer counts, so that the next growth asks for prefixes again; refused or accepted
// settles what follows.
func (f *prefixFallback) active(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sf := range f.subnets {
		if sf.on && now.Before(sf.retryAt) {
			return true
		}
	}
	return false
}

// ofLocked returns the fallback of subnetID ("": the node's own), made if missing (f.mu held).
func (f *prefixFallback) ofLocked(subnetID string) (string, *subnetFallback) {
	if subnetID == "" {
		subnetID = f.subnetID
	}
	if f.subnets == nil {
		f.subnets = map[string]*subnetFallback{}
	}
	sf := f.subnets[subnetID]
	if sf == nil {
		sf = &subnetFallback{}
		f.subnets[subnetID] = sf
	}
	return subnetID, sf
}

// anyOnLocked reports whether some subnet's fallback is on (f.mu held).
func (f *prefixFallback) anyOnLocked() bool {
	for _, sf := range f.subnets {
		if sf.on {
			return true
		}
	}
	return false
}

// refused records an InsufficientCidrBlocks of subnetID at now: single IPs until the next retry, which comes
// twice as late as the last one (jittered by up to a fifth, so that the nodes of a subnet do not retry
// together).
func (f *prefixFallback) refused(subnetID string, now time.Time, err error) {
	f.mu.Lock()
	subnetID, sf := f.ofLocked(subnetID)
	first := !sf.on
	sf.on = true
	if first {
		sf.since = now
	}
	sf.delay = min(max(sf.delay*2, minPrefixRetry), maxPrefixRetry)
	sf.retryAt = now.Add(sf.delay + time.Duration(rand.Int64N(int64(sf.delay)/5+1)))
	retryAt := sf.retryAt
	f.mu.Unlock()
	f.gauge.Set(1)
	if first {
		f.log.Warn("subnet has free addresses but no free /28 prefix; pods get single secondary IPs until prefixes "+
			"can be assigned again. To fix: create a subnet CIDR reservation of type prefix "+
			"(aws ec2 create-subnet-cidr-reservation --reservation-type prefix --subnet-id "+subnetID+" --cidr <CIDR>)",
			"subnet", subnetID, "retryAt", retryAt, "error", err)
		return
	}
	f.log.Debug("prefixes still refused", "subnet", subnetID, "retryAt", retryAt)
}

// accepted records that EC2 assigned a prefix in subnetID: that subnet's fallback ends, and the node grows
// with prefixes again once no subnet's holds.
func (f *prefixFallback) accepted(subnetID string, now time.Time) {
	f.mu.Lock()
	subnetID, sf := f.ofLocked(subnetID)
	was, since := sf.on, sf.since
	sf.on, sf.delay = false, 0
	anyOn := f.anyOnLocked()
	f.mu.Unlock()
	if !anyOn {
		f.gauge.Set(0)
	}
	if was {
		f.log.Info("prefixes assigned again; leaving the single-IP fallback", "subnet", subnetID, "after", now.Sub(since))
	}
}

// status is the line `eniwirectl status` shows at now while a fallback holds, one sentence per subnet, or
// "". A retry time that has passed is not shown as if it were to come: prefixes are asked for at the next
// growth.
func (f *prefixFallback) status(now time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for _, id := range slices.Sorted(maps.Keys(f.subnets)) {
		sf := f.subnets[id]
		if !sf.on {
			continue
		}
		retry := "prefixes tried again at " + sf.retryAt.UTC().Format(time.RFC3339)
		if !now.Before(sf.retryAt) {
			retry = "prefixes tried again at the next growth (due since " + sf.retryAt.UTC().Format(time.RFC3339) + ")"
		}
		lines = append(lines, fmt.Sprintf("subnet %s has no free /28 (InsufficientCidrBlocks) since %s: new room comes as single IPs; "+
			"%s; a subnet CIDR reservation of type prefix in %s fixes it", id, sf.since.UTC().Format(time.RFC3339), retry, id))
	}
	return strings.Join(lines, "; ")
}
