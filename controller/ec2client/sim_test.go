package ec2client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// simEC2 starts the shared simulated world (test/simworld: one VPC, subnet and instance) with the subnet in
// 10.0.1.0/24, and points the SDK's standard variables at it.
func simEC2(t *testing.T) (*ec2sim.Sim, *ec2.Client) {
	t.Helper()
	w := simworld.New(t, simworld.Options{Subnet: ec2sim.SubnetSpec{CIDR: "10.0.1.0/24"}})
	ec2sim.SetSDKEnv(t, w.Server.EC2URL(), "us-west-2")
	api, _, err := ec2client.NewSDK(context.Background(), ec2client.SDKOptions{})
	if err != nil {
		t.Fatalf("building the SDK clients: %v", err)
	}
	return w.Sim, api
}

func TestSimulatorThrottleIsSentOnceBySDKAndRetriedByTheWrapper(t *testing.T) {
	tests := []struct {
		name      string
		throttles int
		wrapped   bool
		// ownSchedule: the caller retries on its own schedule (ec2client.WithOwnSchedule).
		ownSchedule bool
		wantCalls   int64
		wantErr     bool
	}{
		{name: "the bare SDK sends a throttled call exactly once", throttles: 3, wantCalls: 1, wantErr: true},
		{name: "the wrapper retries until the throttles end", throttles: 3, wrapped: true, wantCalls: 4},
		{name: "the wrapper sends a call once when its caller retries on its own schedule", throttles: 3, wrapped: true,
			ownSchedule: true, wantCalls: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, sdk := simEC2(t)
			var api ec2client.EC2API = sdk
			if tt.wrapped {
				// Each throttle empties the local bucket and halves its rate; a fast clock keeps the waits short.
				c, err := ec2client.New(sdk, ec2client.Config{Clock: clock.NewScaled(50), BackoffBase: 5 * time.Millisecond, BackoffCap: 20 * time.Millisecond},
					prometheus.NewRegistry(), nil)
				if err != nil {
					t.Fatalf("wrapping: %v", err)
				}
				api = c
			}
			sim.Faults().Script("DescribeSubnets", ec2client.CodeRequestLimitExceeded, tt.throttles)

			ctx := context.Background()
			if tt.ownSchedule {
				ctx = ec2client.WithOwnSchedule(ctx)
			}
			out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-1"}})
			if got := sim.Counters()["DescribeSubnets"].Calls; got != tt.wantCalls {
				t.Errorf("the simulator saw %d DescribeSubnets calls, want %d", got, tt.wantCalls)
			}
			if tt.wantErr {
				if !ec2client.IsThrottle(err) {
					t.Errorf("got %v, want the throttle", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("describing subnets: %v", err)
			}
			if len(out.Subnets) != 1 || aws.ToString(out.Subnets[0].CidrBlock) != "10.0.1.0/24" {
				t.Errorf("got subnets %+v", out.Subnets)
			}
		})
	}
}

func TestSimulatorDenialIsNotRetried(t *testing.T) {
	sim, sdk := simEC2(t)
	c, err := ec2client.New(sdk, ec2client.Config{}, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatalf("wrapping: %v", err)
	}
	sim.Faults().Script("CreateNetworkInterface", ec2client.CodeUnauthorizedOperation, 5)
	_, err = c.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1")})
	if !errors.Is(err, ec2client.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	if got := sim.Counters()["CreateNetworkInterface"].Calls; got != 1 {
		t.Errorf("the simulator saw %d calls, want 1", got)
	}
}
