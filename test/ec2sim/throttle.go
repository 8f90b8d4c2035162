package ec2sim

import (
	"strings"
	"time"
)

// EC2 throttles per account and region with one token bucket per action; the action's category only
// sets the bucket's default size and refill (docs/ec2-facts.md, "Request throttling"). A request takes one token.

type bucket struct {
	spec   BucketSpec
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time) bool {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.spec.Capacity, b.tokens+dt*b.spec.RefillPerSec)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

var uncategorizedBuckets = map[string]BucketSpec{
	"AssignPrivateIpAddresses":        {100, 5},
	"UnassignPrivateIpAddresses":      {100, 5},
	"AssignIpv6Addresses":             {100, 5},
	"CreateNetworkInterface":          {100, 5},
	"DeleteNetworkInterface":          {100, 5},
	"ModifyNetworkInterfaceAttribute": {100, 5},
	"CreateTags":                      {100, 10},
	"DeleteTags":                      {100, 10},
}

// resourceIntensiveBuckets are AWS's "resource-intensive actions" that eniwire's simulator serves. Their
// category's default happens to equal the mutating actions' (50, refill 5); they are listed so that the
// buckets read as AWS's table. The other security group actions (CreateSecurityGroup, DeleteSecurityGroup,
// AuthorizeSecurityGroupEgress, RevokeSecurityGroupEgress) are plain mutating actions.
var resourceIntensiveBuckets = map[string]BucketSpec{
	"AuthorizeSecurityGroupIngress": {50, 5},
	"RevokeSecurityGroupIngress":    {50, 5},
}

// unfilteredDescribes have a smaller bucket when called with neither a filter nor pagination.
var unfilteredDescribes = map[string]bool{"DescribeInstances": true, "DescribeNetworkInterfaces": true,
	"DescribeSecurityGroups": true}

// DefaultBucket is AWS's default bucket for a bucket key (an action, or "<Action>/unfiltered").
func DefaultBucket(key string) BucketSpec {
	action, unfiltered := strings.CutSuffix(key, "/unfiltered")
	if b, ok := uncategorizedBuckets[action]; ok {
		return b
	}
	if b, ok := resourceIntensiveBuckets[action]; ok {
		return b
	}
	for _, p := range []string{"Describe", "List", "Search", "Get"} {
		if strings.HasPrefix(action, p) {
			if unfiltered {
				return BucketSpec{50, 10}
			}
			return BucketSpec{100, 20}
		}
	}
	return BucketSpec{50, 5}
}

// bucketKey names the bucket a request draws from.
func (s *Sim) bucketKey(r *request) string {
	if !unfilteredDescribes[r.Action] {
		return r.Action
	}
	for k := range r.p {
		if strings.HasPrefix(k, "Filter.") || k == "MaxResults" || k == "NextToken" {
			return r.Action
		}
		if s.cfg.IDListIsFilter && (strings.HasPrefix(k, "NetworkInterfaceId.") || strings.HasPrefix(k, "InstanceId.") ||
			strings.HasPrefix(k, "GroupId.")) {
			return r.Action
		}
	}
	return r.Action + "/unfiltered"
}

// allowLocked takes a token for the request, reporting false when the bucket is empty.
func (s *Sim) allowLocked(region, key string) bool {
	if !s.cfg.Throttling {
		return true
	}
	full := region + "|" + key
	b := s.buckets[full]
	now := s.clk.Now()
	if b == nil {
		spec, ok := s.cfg.Buckets[key]
		if !ok {
			spec = DefaultBucket(key)
		}
		b = &bucket{spec: spec, tokens: spec.Capacity, last: now}
		s.buckets[full] = b
	}
	return b.take(now)
}

// regionOf reads the signing region from a SigV4 Authorization header.
func regionOf(auth, def string) string {
	_, rest, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return def
	}
	if i := strings.IndexAny(rest, ", "); i >= 0 {
		rest = rest[:i]
	}
	parts := strings.Split(rest, "/")
	if len(parts) >= 3 && parts[2] != "" {
		return parts[2]
	}
	return def
}
