package eni_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
)

// A throttle refused the call without applying it, under whichever code the endpoint slows the node down
// with: the create is transient and its plan stays in the books for the next Advance. (The kinds once kept
// their own list of throttle codes beside the EC2 client's, and called the codes it lacked a refusal, which
// dropped the plan.)
func TestACreateThrottledUnderAnyThrottleCodeKeepsItsPlan(t *testing.T) {
	for _, code := range []string{"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
		"EC2ThrottledException", "TooManyRequestsException"} {
		t.Run(code, func(t *testing.T) {
			r := newRig(t, "m5.large")
			ctx := context.Background()
			op, err := r.m.Plan(ctx, 2, eni.Placement{})
			if err != nil {
				t.Fatal(err)
			}
			r.sim.Faults().Script("CreateNetworkInterface", code, 1)
			if err := r.m.Advance(ctx, op); !errors.Is(err, ec2client.ErrTransient) {
				t.Fatalf("a create throttled with %s = %v, want ErrTransient", code, err)
			}
			if rec, ok := r.m.Record(op); !ok || rec.State != journal.Planned {
				t.Fatalf("after the throttle the plan is %+v (in the books: %v), want it planned", rec, ok)
			}
			if err := r.m.Advance(ctx, op); err != nil {
				t.Fatalf("the create after the throttle: %v", err)
			}
		})
	}
}
