package fleet_test

import (
	"context"
	"testing"

	"github.com/eniwire/eniwire/test/fleet"
)

// TestExhaustedNodeSubnetsHandOverToDiscoveredSubnets runs a small fleet through the exhausted scenario: the
// node subnets run out a quarter into a pod rollout's ENI creates, and eniwire must start every pod, the rest
// of its ENIs in the discovered pod subnets, with no leaked ENI and no IP held twice. The full size runs in
// `make fleet`.
func TestExhaustedNodeSubnetsHandOverToDiscoveredSubnets(t *testing.T) {
	const nodes = 10
	opts := fleet.Options{Nodes: nodes, Speedup: 20, Seed: 7, Dir: t.TempDir()}
	r, err := fleet.Run(context.Background(), opts, fleet.Eniwire, fleet.Exhausted)
	if err != nil {
		t.Fatalf("running: %v", err)
	}
	obj, line := jsonLine(t, r)
	t.Log(line)
	for _, k := range []string{"pods_wanted", "pods_started", "pods_started_per_minute", "exhausted_at_seconds", "enis_in_pod_subnets",
		"leaked_enis", "duplicate_ip_assignments"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON line lacks %q: %s", k, line)
		}
	}
	if r.ExhaustedAtSeconds < 0 {
		t.Fatalf("the node subnets were never exhausted: %s", line)
	}
	if !r.Converged || r.PodsStarted != r.PodsWanted {
		t.Errorf("started %d of %d pods (%s)", r.PodsStarted, r.PodsWanted, line)
	}
	if need := r.CallsNeeded["CreateNetworkInterface"]; r.ENIsInPodSubnets < need/2 {
		t.Errorf("%d of the %d ENIs in the pod subnets; at least half should have gone there after the exhaustion (%s)",
			r.ENIsInPodSubnets, need, line)
	}
	for _, miss := range fleet.Misses(r) {
		t.Errorf("eniwire missed a target: %s (%s)", miss, line)
	}
}
