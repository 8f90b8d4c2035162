package ec2client_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/simworld"
)

// The IPv6 calls go through the wrapper like every other: a throttled AssignIpv6Addresses is retried until
// it passes and cuts the local rate of its own bucket only; UnassignIpv6Addresses takes the /80 back.
func TestIPv6CallsAreThrottledAndRetriedInTheirOwnBuckets(t *testing.T) {
	w := simworld.New(t, simworld.Options{DualStack: true})
	c, err := ec2client.New(w.Server.EC2Client(t, func(o *ec2.Options) { o.Retryer = ec2client.NewSDKRetryer(3) }),
		// No recovery over time: at 50 x its 5 s of quiet are 100 ms, which a slow machine spends between the
		// throttles and the reading of the rate.
		ec2client.Config{Clock: clock.NewScaled(50), BackoffBase: 5 * time.Millisecond, BackoffCap: 20 * time.Millisecond, RecoveryDoubling: -1},
		prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatalf("wrapping: %v", err)
	}
	assignRate, otherRate := c.Rate("AssignIpv6Addresses"), c.Rate("AssignPrivateIpAddresses")
	w.Sim.Faults().Script("AssignIpv6Addresses", ec2client.CodeRequestLimitExceeded, 2)
	ctx := context.Background()
	eni := aws.String(w.Instance.PrimaryENI)
	out, err := c.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6PrefixCount: aws.Int32(1)})
	if err != nil || len(out.AssignedIpv6Prefixes) != 1 {
		t.Fatalf("assigning a /80: %+v, %v", out, err)
	}
	if n := w.Sim.Counters()["AssignIpv6Addresses"].Calls; n != 3 {
		t.Errorf("the simulator saw %d AssignIpv6Addresses, want 3 (two throttled, one through)", n)
	}
	if got := c.Rate("AssignIpv6Addresses"); got >= assignRate {
		t.Errorf("AssignIpv6Addresses rate %.3f/s after two throttles, want below %.3f/s", got, assignRate)
	}
	if got := c.Rate("AssignPrivateIpAddresses"); got != otherRate {
		t.Errorf("AssignPrivateIpAddresses rate %.3f/s, want %.3f/s: another action's throttles must not cut it", got, otherRate)
	}
	if _, err := c.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6Prefixes: out.AssignedIpv6Prefixes}); err != nil {
		t.Fatalf("unassigning the /80: %v", err)
	}
	if e, _ := w.Sim.ENI(w.Instance.PrimaryENI); len(e.IPv6Prefixes) != 0 {
		t.Errorf("the primary still holds %v", e.IPv6Prefixes)
	}
	t.Logf("AssignIpv6Addresses rate %.3f/s -> %.3f/s; AssignPrivateIpAddresses %.3f/s", assignRate, c.Rate("AssignIpv6Addresses"), otherRate)
}
