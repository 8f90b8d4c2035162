package controller

// A subnet can have free addresses but no free aligned /28 (single IPs of other nodes scattered across it):
// EC2 then refuses prefixes with InsufficientCidrBlocks. The AWS VPC CNI pauses all growth for 120 s and tries
// the same prefix call again; Cilium falls back to single IPs for good. eniwire grows with single IPs on the
// same ENIs at once, so pods keep starting, and tries prefixes again after a backoff that doubles from
// minPrefixRetry to maxPrefixRetry while the subnet keeps refusing: never off for good, never a storm.

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of the wait before prefixes are tried again after InsufficientCidrBlocks.
const (
	minPrefixRetry = time.Minute
	maxPrefixRetry = 30 * time.Minute
)

// prefixFallback is whether the node grows with single IPs because the subnet refused a prefix, and when it
// tries prefixes again. Who may touch it: any goroutine, under its own lock.
type prefixFallback struct {
	subnetID string
	log      *slog.Logger
	gauge    prometheus.Gauge

	mu      sync.Mutex
	on      bool
	since   time.Time
	retryAt time.Time
	delay   time.Duration
}

// active reports whether growth uses single IPs at now. Once the retry time has come it says no, so that the
// next growth asks for prefixes again; refused or accepted settles what follows.
func (f *prefixFallback) active(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on && now.Before(f.retryAt)
}

// refused records an InsufficientCidrBlocks at now: single IPs until the next retry, which comes twice as
// late as the last one (jittered by up to a fifth, so that the nodes of a subnet do not retry together).
func (f *prefixFallback) refused(now time.Time, err error) {
	f.mu.Lock()
	first := !f.on
	f.on = true
	if first {
		f.since = now
	}
	f.delay = min(max(f.delay*2, minPrefixRetry), maxPrefixRetry)
	f.retryAt = now.Add(f.delay + time.Duration(rand.Int64N(int64(f.delay)/5+1)))
	retryAt := f.retryAt
	f.mu.Unlock()
	f.gauge.Set(1)
	if first {
		f.log.Warn("subnet has free addresses but no free /28 prefix; pods get single secondary IPs until prefixes "+
			"can be assigned again. To fix: create a subnet CIDR reservation of type prefix "+
			"(aws ec2 create-subnet-cidr-reservation --reservation-type prefix --subnet-id "+f.subnetID+" --cidr <CIDR>)",
			"subnet", f.subnetID, "retryAt", retryAt, "error", err)
		return
	}
	f.log.Debug("prefixes still refused", "subnet", f.subnetID, "retryAt", retryAt)
}

// accepted records that EC2 assigned a prefix: the node grows with prefixes again.
func (f *prefixFallback) accepted(now time.Time) {
	f.mu.Lock()
	was, since := f.on, f.since
	f.on, f.delay = false, 0
	f.mu.Unlock()
	if was {
		f.gauge.Set(0)
		f.log.Info("prefixes assigned again; leaving the single-IP fallback", "subnet", f.subnetID, "after", now.Sub(since))
	}
}

// status is the line `eniwirectl status` shows while the fallback holds, or "".
func (f *prefixFallback) status() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return ""
	}
	return fmt.Sprintf("subnet %s has no free /28 (InsufficientCidrBlocks) since %s: new room comes as single IPs; "+
		"prefixes tried again at %s; a subnet CIDR reservation of type prefix fixes it",
		f.subnetID, f.since.UTC().Format(time.RFC3339), f.retryAt.UTC().Format(time.RFC3339))
}
