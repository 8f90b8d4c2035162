package metadata_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// The simulator's instance types and the facts shipped with the binaries are the same facts: what
// LoadLimits reads from the simulator's DescribeInstanceTypes equals KnownLimits for every type the simulator
// knows.
func TestTheShippedInstanceTypesAgreeWithTheSimulator(t *testing.T) {
	srv := httptest.NewServer(ec2sim.New(ec2sim.DefaultConfig()).EC2Handler())
	t.Cleanup(srv.Close)
	ec2sim.SetSDKEnv(t, srv.URL, "us-west-2")
	ctx := context.Background()
	sdk, _, err := ec2client.NewSDK(ctx, ec2client.SDKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range ec2sim.InstanceTypes() {
		fromEC2, err := metadata.LoadLimits(ctx, sdk, it.Name, "")
		if err != nil {
			t.Fatalf("%s from the simulator: %v", it.Name, err)
		}
		shipped, ok := metadata.KnownLimits(it.Name)
		if !ok || shipped != fromEC2 {
			t.Errorf("%s: shipped %+v (complete %v), the simulator's DescribeInstanceTypes %+v", it.Name, shipped, ok, fromEC2)
		}
	}
}

func TestTheShippedInstanceTypesSayWhenTheyWereTaken(t *testing.T) {
	types, taken := metadata.KnownTypes()
	if len(types) < 1000 || !strings.Contains(taken, "taken 20") {
		t.Errorf("%d types, taken %q", len(types), taken)
	}
	if l, ok := metadata.KnownLimits("no.such"); ok {
		t.Errorf("an unknown type is known: %+v", l)
	}
	if _, ok := metadata.KnownLimits("mac2.metal"); ok {
		t.Error("a type whose vCPUs are not shipped counts as complete")
	}
}
