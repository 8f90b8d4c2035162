package ec2client

import (
	"time"

	"github.com/eniwire/eniwire/internal/clock"
)

// Bucket is the client-side token bucket of one EC2 action: RatePerSec tokens are added per second, up to Burst.
type Bucket struct {
	RatePerSec float64 `json:"ratePerSec"`
	Burst      int     `json:"burst"`
}

// nodeShare is the fraction of an account bucket one node takes by default. AWS throttles per account and
// Region, and every node of a cluster draws from the same buckets; a tenth leaves room for ten busy nodes (or
// many mostly idle ones) plus whatever else the account runs, before AWS's own bucket ever runs dry.
const nodeShare = 0.1

// minDefaultRate keeps a per-node default usable even for actions with a small account refill rate.
const minDefaultRate = 0.5

// accountBuckets are AWS's default request token buckets (max capacity, refill per second) for the actions
// eniwire calls (AWS's "Request throttling for the Amazon EC2 API"; docs/ec2-facts.md, "Request throttling").
// Describe calls are listed with the larger filtered/paginated bucket: the controller always filters.
var accountBuckets = map[string]struct{ capacity, refill float64 }{
	"CreateNetworkInterface":          {100, 5},  // uncategorized
	"AttachNetworkInterface":          {50, 5},   // mutating
	"ModifyNetworkInterfaceAttribute": {100, 5},  // uncategorized
	"DetachNetworkInterface":          {50, 5},   // mutating
	"DeleteNetworkInterface":          {100, 5},  // uncategorized
	"AssignPrivateIpAddresses":        {100, 5},  // uncategorized
	"UnassignPrivateIpAddresses":      {100, 5},  // uncategorized
	"AssignIpv6Addresses":             {100, 5},  // uncategorized
	"UnassignIpv6Addresses":           {50, 5},   // mutating (not on the uncategorized list; docs/ec2-facts.md)
	"CreateTags":                      {100, 10}, // uncategorized
	"DescribeNetworkInterfaces":       {100, 20}, // non-mutating
	"DescribeInstances":               {100, 20}, // non-mutating
	"DescribeInstanceTypes":           {100, 20}, // non-mutating
	"DescribeSubnets":                 {100, 20}, // non-mutating
	"DescribeVpcs":                    {100, 20}, // non-mutating
	// Called without filter and pagination, these two draw from AWS's smaller unfiltered bucket.
	"DescribeNetworkInterfaces/unfiltered": {50, 10},
	"DescribeInstances/unfiltered":         {50, 10},
}

// DefaultBuckets returns the per-node default bucket of every action: a tenth of AWS's account refill rate
// (at least 0.5/s) and a tenth of its capacity (at least 1). The resulting numbers:
//
//	CreateNetworkInterface, ModifyNetworkInterfaceAttribute, DeleteNetworkInterface,
//	AssignPrivateIpAddresses, UnassignPrivateIpAddresses,
//	AssignIpv6Addresses                                         0.5/s burst 10
//	AttachNetworkInterface, DetachNetworkInterface,
//	UnassignIpv6Addresses                                       0.5/s burst 5
//	CreateTags                                                  1/s   burst 10
//	DescribeNetworkInterfaces, DescribeInstances,
//	DescribeInstanceTypes, DescribeSubnets, DescribeVpcs        2/s   burst 10
//	DescribeNetworkInterfaces/unfiltered, DescribeInstances/unfiltered
//	(no filter, no ID list, no pagination)                      1/s   burst 5
func DefaultBuckets() map[string]Bucket {
	out := make(map[string]Bucket, len(accountBuckets))
	for action, b := range accountBuckets {
		out[action] = Bucket{
			RatePerSec: max(b.refill*nodeShare, minDefaultRate),
			Burst:      max(int(b.capacity*nodeShare), 1),
		}
	}
	return out
}

// DefaultTimeouts returns the per-attempt deadline of every action: 20 s for the calls EC2 takes longest to
// answer (CreateNetworkInterface, AttachNetworkInterface), 10 s for every other. EC2 answers these actions in
// well under a second normally; the deadlines leave room for the SDK's own retries.
func DefaultTimeouts() map[string]time.Duration {
	out := make(map[string]time.Duration, len(accountBuckets))
	for action := range accountBuckets {
		out[action] = defaultTimeout
	}
	out["CreateNetworkInterface"] = 20 * time.Second
	out["AttachNetworkInterface"] = 20 * time.Second
	return out
}

// defaultTimeout bounds an action missing from both the configuration and the defaults.
const defaultTimeout = 10 * time.Second

// fallbackBucket is used for an action missing from both the configuration and the defaults (a method added
// to EC2API later): the smallest default, so that a forgotten entry errs on the side of the account's budget.
var fallbackBucket = Bucket{RatePerSec: minDefaultRate, Burst: 5}

// Config tunes the wrapper. The zero value of every field means its default.
type Config struct {
	// Buckets overrides the default bucket of the actions it names (action name as in the EC2 API, e.g.
	// "AssignPrivateIpAddresses", or "DescribeNetworkInterfaces/unfiltered" and "DescribeInstances/unfiltered"
	// for those calls without filter, ID list or pagination); actions it does not name keep DefaultBuckets.
	Buckets map[string]Bucket

	// BackoffBase and BackoffCap shape the full-jitter backoff after a throttle: the delay before retry n
	// (n = 0, 1, ...) is uniform in [0, min(BackoffCap, BackoffBase*2^n)). Defaults 1 s and 20 s, the values
	// the SDK itself uses for throttles.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// MaxAttempts is the number of attempts of one call under throttling, the first included (default 6,
	// about 30 s of expected backoff). A context deadline ends the retries earlier.
	MaxAttempts int

	// DecreaseFactor multiplies an action's local rate on each throttle (default 0.5). MinRateFraction is the
	// floor of that cut as a fraction of the configured rate (default 0.1). RecoveryFraction is the additive
	// step back toward the configured rate on each success, as a fraction of it (default 0.05).
	//
	// The floor is a trade between the fleet and its tail. A node cut to the floor calls at most every
	// 1/floor seconds (AttachNetworkInterface: 0.05/s, every 20 s), and that is also how long it takes to notice
	// that the account has room again. A floor of a thousandth of the account (0.005/s: 1,000 nodes at the
	// floor ask for the account's 5/s) was tried with the recovery below: a 1,000-node rollout took 2.2 x its
	// lower bound instead of 1.5. At 0.05/s, 1,000 nodes at the floor offer ten times the account's rate;
	// throttled calls take no token of the account's bucket, so they cost calls, not convergence, and the
	// backoff spreads them.
	DecreaseFactor   float64
	MinRateFraction  float64
	RecoveryFraction float64
	// RecoveryQuiet and RecoveryDoubling are the recovery over time (defaults 5 s and 2 s): once RecoveryQuiet
	// has passed without a throttle of the action, its cut rate doubles every RecoveryDoubling until it is whole
	// (from the floor in 5 + 2 x log2(10), about 12 s after the last throttle). Successes
	// alone climb too slowly from the floor (18 of them, the first 20 s away): when a rollout's throttling
	// ends, the last nodes must use the account's whole bucket at once, since convergence is the last node's.
	// A zero RecoveryDoubling takes the default; a negative one turns the recovery over time off.
	RecoveryQuiet    time.Duration
	RecoveryDoubling time.Duration

	// Timeouts bound one attempt of a call per action (the SDK's own retries of transport errors and 5xx
	// included), in the clock's time; actions it does not name keep DefaultTimeouts. A black-holed request
	// then fails with context.DeadlineExceeded instead of holding its caller for as long as the connection
	// stays open (the SDK's HTTP client has no overall timeout).
	Timeouts map[string]time.Duration

	// Clock is the time source of every wait (default clock.Real).
	Clock clock.Clock
	// Rand returns a uniform float64 in [0, 1) for the jitter (default math/rand/v2).
	Rand func() float64
}

func (c Config) withDefaults() Config {
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffCap <= 0 {
		c.BackoffCap = 20 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 6
	}
	if c.DecreaseFactor <= 0 || c.DecreaseFactor >= 1 {
		c.DecreaseFactor = 0.5
	}
	if c.MinRateFraction <= 0 || c.MinRateFraction > 1 {
		c.MinRateFraction = 0.1
	}
	if c.RecoveryFraction <= 0 {
		c.RecoveryFraction = 0.05
	}
	if c.RecoveryQuiet <= 0 {
		c.RecoveryQuiet = 5 * time.Second
	}
	if c.RecoveryDoubling == 0 {
		c.RecoveryDoubling = 2 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// timeoutFor resolves the per-attempt deadline of one action: configuration first, then the defaults.
func (c Config) timeoutFor(action string) time.Duration {
	if d, ok := c.Timeouts[action]; ok && d > 0 {
		return d
	}
	if d, ok := DefaultTimeouts()[action]; ok {
		return d
	}
	return defaultTimeout
}

// bucketFor resolves the bucket of one action: configuration first, then the defaults.
func (c Config) bucketFor(action string) Bucket {
	b, ok := c.Buckets[action]
	if !ok {
		var known bool
		if b, known = DefaultBuckets()[action]; !known {
			b = fallbackBucket
		}
	}
	if b.RatePerSec <= 0 {
		b.RatePerSec = fallbackBucket.RatePerSec
	}
	if b.Burst < 1 {
		b.Burst = 1
	}
	return b
}
