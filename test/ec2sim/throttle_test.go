package ec2sim

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/eniwire/eniwire/internal/clock"
)

// burst calls until the first throttle (or max calls) and returns how many succeeded and the wall time.
func burst(t *testing.T, call func() error, max int) (ok int, throttled bool, took time.Duration) {
	t.Helper()
	start := time.Now()
	for range max {
		err := call()
		if err == nil {
			ok++
			continue
		}
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == CodeRequestLimitExceeded {
			return ok, true, time.Since(start)
		}
		t.Fatalf("unexpected error: %v", err)
	}
	return ok, false, time.Since(start)
}

func TestThrottlingFollowsAWSBuckets(t *testing.T) {
	cases := []struct {
		name           string
		factor         float64
		call           func(w *world) error
		capacity, rate float64
	}{
		{"a filtered describe draws from the 100/20 bucket", 1, func(w *world) error {
			_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{
				Filters: []types.Filter{{Name: aws.String("status"), Values: []string{"available"}}}})
			return err
		}, 100, 20},
		{"an unfiltered describe draws from the 50/10 bucket", 1, func(w *world) error {
			_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{})
			return err
		}, 50, 10},
		{"CreateTags has 100/10", 1, func(w *world) error {
			_, err := w.ec2.CreateTags(ctxT(t), &ec2.CreateTagsInput{Resources: []string{w.inst.PrimaryENI},
				Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			return err
		}, 100, 10},
		{"AttachNetworkInterface is mutating, 50/5, here on a 2x clock", 2, func(w *world) error {
			_, err := w.attach(t, "eni-0123456789abcdef0", w.inst.ID, 1)
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == CodeInvalidENIIDNotFound {
				return nil // admitted by the bucket; the answer does not matter
			}
			return err
		}, 50, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, func(c *Config) {
				c.Throttling = true
				c.Clock = clock.NewScaled(tc.factor)
			})
			ok, throttled, took := burst(t, func() error { return tc.call(w) }, int(tc.capacity)*3)
			virtual := took.Seconds() * tc.factor
			if !throttled || float64(ok) < tc.capacity || float64(ok) > tc.capacity+virtual*tc.rate+1 {
				t.Fatalf("burst: %d succeeded in %v (throttled %v), want about %v", ok, took, throttled, tc.capacity)
			}
			// Refill: over a virtual second the bucket gains `rate` tokens.
			wall := time.Duration(float64(time.Second) / tc.factor)
			time.Sleep(wall)
			ok2, throttled2, took2 := burst(t, func() error { return tc.call(w) }, int(tc.capacity)*3)
			v2 := (wall + took2).Seconds() * tc.factor
			if !throttled2 || float64(ok2) < tc.rate-1 || float64(ok2) > v2*tc.rate+2 {
				t.Fatalf("after 1 virtual second: %d succeeded, want about %v", ok2, tc.rate)
			}
			if c := w.sim.Counters(); c.total().Throttled < 2 {
				t.Fatalf("throttles not counted: %+v", c)
			}
		})
	}
	t.Run("switched off, nothing is throttled", func(t *testing.T) {
		w := newWorld(t, nil)
		ok, throttled, _ := burst(t, func() error {
			_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{})
			return err
		}, 200)
		if throttled || ok != 200 {
			t.Fatalf("%d ok, throttled %v", ok, throttled)
		}
	})
	t.Run("a bucket override applies to its action only", func(t *testing.T) {
		w := newWorld(t, func(c *Config) {
			c.Throttling = true
			c.Buckets = map[string]BucketSpec{"DescribeSubnets": {Capacity: 3, RefillPerSec: 0.001}}
		})
		ok, throttled, _ := burst(t, func() error { _, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{}); return err }, 10)
		if !throttled || ok != 3 {
			t.Fatalf("%d ok, throttled %v", ok, throttled)
		}
		if _, err := w.ec2.DescribeInstanceTypes(ctxT(t), &ec2.DescribeInstanceTypesInput{}); err != nil {
			t.Fatalf("another action was throttled: %v", err)
		}
	})
}

func (c Counters) total() ActionCounters {
	var t ActionCounters
	for _, a := range c {
		t.Calls += a.Calls
		t.Throttled += a.Throttled
	}
	return t
}
