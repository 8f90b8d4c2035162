package ec2client

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eniwire/eniwire/internal/clock"
)

// fastRetries is a configuration whose backoffs take a few virtual milliseconds.
func fastRetries(clk clock.Clock, maxAttempts int) Config {
	return Config{Clock: clk, BackoffBase: 10 * time.Millisecond, BackoffCap: 100 * time.Millisecond, MaxAttempts: maxAttempts,
		Buckets: map[string]Bucket{"AssignPrivateIpAddresses": {RatePerSec: 1000, Burst: 100}}}
}

func newENI(t *testing.T, c *Client) *string {
	t.Helper()
	out, err := c.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1")})
	if err != nil {
		t.Fatalf("creating an ENI: %v", err)
	}
	return out.NetworkInterface.NetworkInterfaceId
}

func TestThrottlesAreRetriedWithBackoff(t *testing.T) {
	tests := []struct {
		name        string
		throttles   int
		maxAttempts int
		wantCalls   int
		wantErr     bool
	}{
		{name: "a call throttled three times succeeds on the fourth attempt", throttles: 3, maxAttempts: 6, wantCalls: 4},
		{name: "a call throttled on every attempt gives up after MaxAttempts", throttles: 10, maxAttempts: 3, wantCalls: 3, wantErr: true},
		{name: "an unthrottled call is made once", throttles: 0, maxAttempts: 6, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewScaled(10)
			fake := newFakeEC2(clk)
			c, _ := newTestClient(t, fake, fastRetries(clk, tt.maxAttempts))
			eni := newENI(t, c)
			fake.fail("AssignPrivateIpAddresses", CodeRequestLimitExceeded, tt.throttles)

			out, err := c.AssignPrivateIpAddresses(context.Background(), &ec2.AssignPrivateIpAddressesInput{
				NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(2),
			})
			if got := fake.count("AssignPrivateIpAddresses"); got != tt.wantCalls {
				t.Errorf("EC2 saw %d calls, want %d", got, tt.wantCalls)
			}
			if tt.wantErr {
				if !IsThrottle(err) || ErrorCode(err) != CodeRequestLimitExceeded {
					t.Fatalf("got error %v, want the last throttle", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("assigning: %v", err)
			}
			if len(out.AssignedPrivateIpAddresses) != 2 {
				t.Errorf("assigned %d addresses, want 2", len(out.AssignedPrivateIpAddresses))
			}
		})
	}
}

func TestRetriesStopWhenTheContextEnds(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
	}{
		{name: "a deadline shorter than the next backoff ends the call at once", wantErr: context.DeadlineExceeded,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Second)
			}},
		{name: "a cancellation during the backoff ends the call", wantErr: context.Canceled,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.Real{}
			fake := newFakeEC2(clk)
			// Backoffs of about half an hour: only the context can end the call in time.
			c, _ := newTestClient(t, fake, Config{Clock: clk, BackoffBase: time.Hour, BackoffCap: time.Hour, MaxAttempts: 10,
				Rand: func() float64 { return 0.5 }})
			fake.fail("DescribeSubnets", CodeRequestLimitExceeded, 100)
			ctx, cancel := tt.ctx()
			defer cancel()

			began := time.Now()
			_, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
			if !errors.Is(err, tt.wantErr) || !IsThrottle(err) {
				t.Errorf("got %v, want %v that also carries the throttle", err, tt.wantErr)
			}
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("the call took %v to end", took)
			}
			if n := fake.count("DescribeSubnets"); n != 1 {
				t.Errorf("EC2 saw %d calls, want 1", n)
			}
		})
	}
}

func TestUnauthorizedOperationIsNotRetried(t *testing.T) {
	clk := clock.NewScaled(10)
	fake := newFakeEC2(clk)
	c, reg := newTestClient(t, fake, fastRetries(clk, 6))
	fake.fail("CreateNetworkInterface", CodeUnauthorizedOperation, 5)

	_, err := c.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1")})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	if ErrorCode(err) != CodeUnauthorizedOperation {
		t.Errorf("ErrorCode = %q, want the EC2 code still readable", ErrorCode(err))
	}
	if !strings.Contains(err.Error(), "ec2:CreateNetworkInterface") {
		t.Errorf("error %q does not name the permission to grant", err)
	}
	if n := fake.count("CreateNetworkInterface"); n != 1 {
		t.Errorf("EC2 saw %d calls, want exactly 1", n)
	}
	if got := testutil.ToFloat64(c.metrics.calls.WithLabelValues("CreateNetworkInterface", OutcomeError, CodeUnauthorizedOperation)); got != 1 {
		t.Errorf("counted %v denied calls, want 1", got)
	}
	if got := sumOf(t, reg, "eniwire_ec2_throttled_total"); got != 0 {
		t.Errorf("throttled_total sums to %v, want 0", got)
	}
}

// sumOf is the sum of the samples of the counter or gauge family name in reg.
func sumOf(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// Every action's throttle counter is there at 0 before the first call, so that rate() and increase() in an
// alert count the first throttles too (a series born at 1 has no increase to show).
func TestEveryActionHasAThrottleSeriesAtZeroFromTheStart(t *testing.T) {
	_, reg := newTestClient(t, newFakeEC2(clock.NewScaled(10)), Config{})
	actions := map[string]bool{}
	for bucket := range DefaultBuckets() {
		action, _, _ := strings.Cut(bucket, "/")
		actions[action] = true
	}
	n, err := testutil.GatherAndCount(reg, "eniwire_ec2_throttled_total")
	if err != nil || n != len(actions) {
		t.Errorf("throttled_total has %d series (%v), want one per action (%d)", n, err, len(actions))
	}
	if got := sumOf(t, reg, "eniwire_ec2_throttled_total"); got != 0 {
		t.Errorf("throttled_total sums to %v before any call, want 0", got)
	}
}

func TestOtherErrorsAreReturnedUnchanged(t *testing.T) {
	clk := clock.NewScaled(10)
	fake := newFakeEC2(clk)
	fake.ipsPerENI = 3
	c, _ := newTestClient(t, fake, fastRetries(clk, 6))
	eni := newENI(t, c)

	_, err := c.AssignPrivateIpAddresses(context.Background(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(5),
	})
	if ErrorCode(err) != "PrivateIpAddressLimitExceeded" {
		t.Fatalf("got %v, want PrivateIpAddressLimitExceeded", err)
	}
	if n := fake.count("AssignPrivateIpAddresses"); n != 1 {
		t.Errorf("EC2 saw %d calls, want 1 (capacity errors are not retried)", n)
	}
}

func TestThrottleCutsTheRateAndSuccessesRestoreIt(t *testing.T) {
	clk := clock.NewScaled(200)
	fake := newFakeEC2(clk)
	const action = "DescribeNetworkInterfaces"
	// The recovery over time is off: this test counts the AIMD steps of throttles and successes alone.
	c, _ := newTestClient(t, fake, Config{Clock: clk, BackoffBase: 10 * time.Millisecond, MaxAttempts: 10, RecoveryDoubling: -1,
		Buckets: map[string]Bucket{action: {RatePerSec: 8, Burst: 2}}})
	gauge := c.metrics.rate.WithLabelValues(action)
	describe := func() {
		t.Helper()
		if _, err := c.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)}); err != nil {
			t.Fatalf("describing: %v", err)
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	if got := testutil.ToFloat64(gauge); got != 8 {
		t.Fatalf("limiter_rate starts at %v, want 8", got)
	}
	fake.fail(action, CodeRequestLimitExceeded, 2)
	describe()
	// Two halvings (8 -> 4 -> 2), then one success adds 5% of 8.
	if got := c.Rate(action); !near(got, 2.4) {
		t.Errorf("rate after two throttles and a success = %v, want 2.4", got)
	}
	if got := testutil.ToFloat64(gauge); !near(got, 2.4) {
		t.Errorf("limiter_rate gauge = %v, want 2.4", got)
	}

	fake.fail(action, CodeRequestLimitExceeded, 6)
	describe()
	// The cut stops at the floor, a tenth of the configured rate.
	if got := c.Rate(action); !near(got, 0.8+0.4) {
		t.Errorf("rate after a run of throttles = %v, want the floor 0.8 plus one step", got)
	}

	for range 20 {
		describe()
	}
	if got := c.Rate(action); !near(got, 8) {
		t.Errorf("rate after 20 successes = %v, want it back at 8", got)
	}
	if got := testutil.ToFloat64(c.metrics.throttled.WithLabelValues(action)); got != 8 {
		t.Errorf("throttled_total = %v, want 8", got)
	}
}

func TestEveryAttemptIsCountedAndTimed(t *testing.T) {
	clk := clock.NewScaled(10)
	fake := newFakeEC2(clk)
	c, reg := newTestClient(t, fake, fastRetries(clk, 6))
	eni := newENI(t, c)
	fake.fail("DeleteNetworkInterface", CodeRequestLimitExceeded, 1)
	if _, err := c.DeleteNetworkInterface(context.Background(), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni}); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	_, err := c.DeleteNetworkInterface(context.Background(), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni})
	if ErrorCode(err) != "InvalidNetworkInterfaceID.NotFound" {
		t.Fatalf("deleting again: got %v, want InvalidNetworkInterfaceID.NotFound", err)
	}

	for _, tt := range []struct {
		outcome, code string
		want          float64
	}{
		{OutcomeThrottled, CodeRequestLimitExceeded, 1},
		{OutcomeSuccess, "none", 1},
		{OutcomeError, "InvalidNetworkInterfaceID.NotFound", 1},
	} {
		if got := testutil.ToFloat64(c.metrics.calls.WithLabelValues("DeleteNetworkInterface", tt.outcome, tt.code)); got != tt.want {
			t.Errorf("calls_total{outcome=%s,code=%s} = %v, want %v", tt.outcome, tt.code, got, tt.want)
		}
	}
	if got := testutil.ToFloat64(c.metrics.throttled.WithLabelValues("DeleteNetworkInterface")); got != 1 {
		t.Errorf("throttled_total = %v, want 1", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	var samples uint64
	for _, mf := range mfs {
		if mf.GetName() != "eniwire_ec2_call_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == "DeleteNetworkInterface" {
					samples = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if samples != 3 {
		t.Errorf("call_duration_seconds{action=DeleteNetworkInterface} has %d samples, want 3", samples)
	}
	if n, err := testutil.GatherAndCount(reg, "eniwire_ec2_limiter_rate"); err != nil || n < 12 {
		t.Errorf("limiter_rate has %d series (%v), want one per action", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %v", problems, err)
	}
}

func TestBackoffIsFullJitterUnderACap(t *testing.T) {
	for _, tt := range []struct {
		name string
		n    int
		rnd  float64
		want time.Duration
	}{
		{"the first retry waits up to the base", 0, 0.5, 500 * time.Millisecond},
		{"each retry doubles the window", 3, 0.5, 4 * time.Second},
		{"the window stops at the cap", 10, 0.5, 10 * time.Second},
		{"a huge attempt number does not overflow", 200, 0.5, 10 * time.Second},
		{"the low end of the window is zero", 3, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(time.Second, 20*time.Second, tt.n, func() float64 { return tt.rnd }); got != tt.want {
				t.Errorf("backoff(n=%d, rnd=%v) = %v, want %v", tt.n, tt.rnd, got, tt.want)
			}
		})
	}
}

func TestStartupJitterWaitsLessThanItsMaximum(t *testing.T) {
	clk := clock.NewScaled(100)
	began := clk.Now()
	if err := StartupJitter(context.Background(), clk, 10*time.Second); err != nil {
		t.Fatalf("jitter: %v", err)
	}
	if waited := clk.Since(began); waited > 11*time.Second {
		t.Errorf("waited %v of virtual time, want under 10s", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := StartupJitter(ctx, clock.Real{}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("jitter with an ended context returned %v", err)
	}
}

func TestCutRateGrowsBackOverTimeOnceThrottlesStop(t *testing.T) {
	clk := clock.NewScaled(100)
	fake := newFakeEC2(clk)
	const action = "DescribeNetworkInterfaces"
	c, _ := newTestClient(t, fake, Config{Clock: clk, BackoffBase: 10 * time.Millisecond, MaxAttempts: 10,
		// 20 s of quiet are 200 ms here: the rate must still be cut when read right after the call, however
		// slow the machine.
		RecoveryQuiet: 20 * time.Second, RecoveryDoubling: 500 * time.Millisecond,
		Buckets: map[string]Bucket{action: {RatePerSec: 8, Burst: 2}}})
	fake.fail(action, CodeRequestLimitExceeded, 6)
	if _, err := c.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)}); err != nil {
		t.Fatalf("describing: %v", err)
	}
	if got := c.Rate(action); got >= 4 {
		t.Fatalf("rate after six throttles = %v, want it cut well below 8", got)
	}
	// No call, no success: only time passes. After the quiet period the rate doubles every 0.5 s.
	deadline := time.Now().Add(5 * time.Second)
	for c.Rate(action) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("rate still %v after %v of virtual time without a throttle, want 8", c.Rate(action), 500*time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLastThrottleTellsWhenEC2LastThrottledAnAction(t *testing.T) {
	clk := clock.NewScaled(200)
	fake := newFakeEC2(clk)
	const action = "DescribeNetworkInterfaces"
	c, _ := newTestClient(t, fake, Config{Clock: clk, BackoffBase: 10 * time.Millisecond, MaxAttempts: 10})
	describe := func() {
		t.Helper()
		if _, err := c.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)}); err != nil {
			t.Fatalf("describing: %v", err)
		}
	}
	describe()
	if got := c.LastThrottle(action); !got.IsZero() {
		t.Fatalf("LastThrottle before any throttle = %v, want the zero time", got)
	}
	before := clk.Now()
	fake.fail(action, CodeRequestLimitExceeded, 1)
	describe()
	after := clk.Now()
	if got := c.LastThrottle(action); got.Before(before) || got.After(after) {
		t.Errorf("LastThrottle = %v, want within the throttled call [%v, %v]", got, before, after)
	}
	if got := c.LastThrottle("AttachNetworkInterface"); !got.IsZero() {
		t.Errorf("LastThrottle of an action never throttled = %v, want the zero time", got)
	}
}
