package ec2client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/internal/clock"
)

func newTestClient(t testing.TB, api EC2API, cfg Config) (*Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(api, cfg, reg, nil)
	if err != nil {
		t.Fatalf("creating the client: %v", err)
	}
	return c, reg
}

// waiting returns how many callers wait at priority p for action's token.
func (c *Client) waiting(action string, p Priority) int {
	l := c.limiter(action)
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queues[p])
}

// eventually polls cond until it holds or the (wall) deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBucketLimitsEachActionToItsRate(t *testing.T) {
	tests := []struct {
		name   string
		bucket Bucket
		window time.Duration // virtual
	}{
		{name: "a burst of 5 then 10 calls per second", bucket: Bucket{RatePerSec: 10, Burst: 5}, window: 4 * time.Second},
		{name: "a burst of 1 then 2 calls per second", bucket: Bucket{RatePerSec: 2, Burst: 1}, window: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewScaled(40)
			fake := newFakeEC2(clk)
			c, _ := newTestClient(t, fake, Config{Clock: clk, Buckets: map[string]Bucket{"DescribeSubnets": tt.bucket}})

			start := clk.Now()
			end := start.Add(tt.window)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for clk.Now().Before(end) {
						if _, err := c.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}); err != nil {
							t.Errorf("describing subnets: %v", err)
							return
						}
					}
				})
			}
			// Another action has its own bucket: it is not slowed by the first one's queue.
			for range 20 {
				if _, err := c.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{}); err != nil {
					t.Fatalf("describing instance types: %v", err)
				}
			}
			wg.Wait()

			inWindow := 0
			for _, call := range fake.callLog() {
				if call.action == "DescribeSubnets" && !call.at.After(end) {
					inWindow++
				}
			}
			allowed := float64(tt.bucket.Burst) + tt.bucket.RatePerSec*tt.window.Seconds()
			t.Logf("%d calls in %v of virtual time, bucket allows %.0f", inWindow, tt.window, allowed)
			if float64(inWindow) > allowed+1 {
				t.Errorf("made %d calls in %v, the bucket allows at most %.0f", inWindow, tt.window, allowed)
			}
			// The lower check only catches a limiter that stalls: on a loaded 2-core machine the callers
			// themselves may not keep up with the bucket, so it is loose on purpose.
			if float64(inWindow) < 0.5*allowed {
				t.Errorf("made only %d calls in %v, the bucket allows %.0f: the limiter is too slow", inWindow, tt.window, allowed)
			}
			if n := fake.count("DescribeInstanceTypes"); n != 20 {
				t.Errorf("DescribeInstanceTypes made %d calls, want 20", n)
			}
		})
	}
}

func TestUrgentCallGoesBeforeWaitingHousekeeping(t *testing.T) {
	clk := clock.NewScaled(20)
	fake := newFakeEC2(clk)
	const action = "AssignPrivateIpAddresses"
	c, _ := newTestClient(t, fake, Config{Clock: clk, Buckets: map[string]Bucket{action: {RatePerSec: 2, Burst: 1}}})
	eni, err := c.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1")})
	if err != nil {
		t.Fatalf("creating an ENI: %v", err)
	}
	assign := func(ctx context.Context) error {
		_, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: eni.NetworkInterface.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1),
		})
		return err
	}
	// Spend the burst so that everything after waits.
	if err := assign(context.Background()); err != nil {
		t.Fatalf("assigning: %v", err)
	}

	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if err := assign(withTag(context.Background(), "housekeeping")); err != nil {
				t.Errorf("housekeeping call %d: %v", i, err)
			}
		})
	}
	eventually(t, "three housekeeping calls wait", func() bool { return c.waiting(action, Housekeeping) == 3 })
	wg.Go(func() {
		if err := assign(withTag(WithPriority(context.Background(), Urgent), "urgent")); err != nil {
			t.Errorf("urgent call: %v", err)
		}
	})
	wg.Wait()

	var order []string
	for _, call := range fake.callLog() {
		if call.action == action && call.tag != "" {
			order = append(order, call.tag)
		}
	}
	if len(order) != 4 || order[0] != "urgent" {
		t.Errorf("calls were served in order %v, want the urgent one first", order)
	}
}

func TestWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	clk := clock.NewScaled(1)
	c, _ := newTestClient(t, newFakeEC2(clk), Config{Clock: clk, Buckets: map[string]Bucket{"CreateTags": {RatePerSec: 0.01, Burst: 1}}})
	if _, err := c.CreateTags(context.Background(), &ec2.CreateTagsInput{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("a call that cannot get a token before its deadline returned %v", err)
	}
	if n := c.waiting("CreateTags", Housekeeping); n != 0 {
		t.Errorf("%d waiters left in the queue after their context ended", n)
	}
}

func TestPriorityDefaultsToHousekeeping(t *testing.T) {
	if p := PriorityFrom(context.Background()); p != Housekeeping {
		t.Errorf("a bare context has priority %v", p)
	}
	if p := PriorityFrom(WithPriority(context.Background(), Urgent)); p != Urgent {
		t.Errorf("WithPriority(Urgent) gives %v", p)
	}
}

func TestDefaultBucketsAreAPerNodeShareOfTheAccount(t *testing.T) {
	b := DefaultBuckets()
	for _, tt := range []struct {
		action string
		want   Bucket
	}{
		{"CreateNetworkInterface", Bucket{0.5, 10}},
		{"AttachNetworkInterface", Bucket{0.5, 5}},
		{"CreateTags", Bucket{1, 10}},
		{"DescribeNetworkInterfaces", Bucket{2, 10}},
	} {
		if b[tt.action] != tt.want {
			t.Errorf("default bucket of %s is %+v, want %+v", tt.action, b[tt.action], tt.want)
		}
	}
	for _, m := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute", "DetachNetworkInterface",
		"DeleteNetworkInterface", "DescribeNetworkInterfaces", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "CreateTags",
		"DescribeInstances", "DescribeInstanceTypes", "DescribeSubnets"} {
		if _, ok := b[m]; !ok {
			t.Errorf("EC2API method %s has no default bucket", m)
		}
	}
}

func TestUnfilteredDescribesUseTheirOwnSmallerBucket(t *testing.T) {
	clk := clock.NewScaled(1)
	fake := newFakeEC2(clk)
	// The unfiltered bucket holds one token and refills in 100 s; the filtered one is roomy.
	c, _ := newTestClient(t, fake, Config{Clock: clk, Buckets: map[string]Bucket{
		"DescribeNetworkInterfaces/unfiltered": {RatePerSec: 0.01, Burst: 1},
		"DescribeNetworkInterfaces":            {RatePerSec: 100, Burst: 100},
	}})
	ctx := context.Background()
	if _, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{}); err != nil {
		t.Fatalf("unfiltered describe: %v", err)
	}
	for _, in := range []*ec2.DescribeNetworkInterfacesInput{
		{Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{"i-1"}}}},
		{MaxResults: aws.Int32(5)},
	} {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.DescribeNetworkInterfaces(tctx, in)
		cancel()
		if err != nil {
			t.Errorf("filtered or paginated describe %+v waited on the unfiltered bucket: %v", in, err)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.DescribeNetworkInterfaces(tctx, &ec2.DescribeNetworkInterfacesInput{}); err == nil {
		t.Error("a second unfiltered describe did not wait for the empty unfiltered bucket")
	}
}
