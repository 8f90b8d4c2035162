package vpcfabric

import (
	"context"
	"testing"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// NewForTest starts a fabric for one test: it needs root and nft (failing under CI=true, skipping
// elsewhere), names the fabric after the test's process unless opts.Name is set, and closes it when the
// test ends.
func NewForTest(t testing.TB, sim *ec2sim.Sim, opts Options) *Fabric {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "nft")
	ctx, cancel := context.WithCancel(context.Background())
	f, err := New(ctx, sim, opts)
	if err != nil {
		cancel()
		t.Fatalf("starting the VPC fabric: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("closing the VPC fabric: %v", err)
		}
		cancel()
	})
	return f
}
