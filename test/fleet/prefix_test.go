package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/eniwire/eniwire/test/fleet"
)

// TestPrefixScenarios runs small fleets through rollout-prefix and fragmented with eniwire and the model of the
// AWS VPC CNI. eniwire must start every pod with no leaked ENI, no duplicate IP and every pod's IP on its node;
// in the fragmented subnet it must fall back to single IPs at once after one refused prefix per node (its pods
// then fill every slot, so it has no room to try a prefix again), while the model, which retries the same prefix
// call every 120 s, starts none. The full sizes run in `make fleet-prefix`.
func TestPrefixScenarios(t *testing.T) {
	const nodes = 10
	keys := []string{"strategy", "scenario", "nodes", "converge_seconds", "lower_bound_seconds", "ec2_calls",
		"throttled_calls", "leaked_enis", "duplicate_ip_assignments", "pods_wanted", "ec2_calls_per_pod"}
	for _, sc := range []fleet.Scenario{fleet.RolloutPrefix, fleet.Fragmented} {
		for _, st := range []fleet.Strategy{fleet.Eniwire, fleet.VPCCNI} {
			t.Run(string(st)+" in "+string(sc), func(t *testing.T) {
				// 260 s: two of the AWS VPC CNI's 120 s pauses.
				opts := fleet.Options{Nodes: nodes, Speedup: 20, Seed: 7, Dir: t.TempDir(), FragmentedWindow: 260 * time.Second}
				r, err := fleet.Run(context.Background(), opts, st, sc)
				if err != nil {
					t.Fatalf("running: %v", err)
				}
				obj, line := jsonLine(t, r)
				for _, k := range keys {
					if _, ok := obj[k]; !ok && !(k == "ec2_calls_per_pod" && r.PodsStarted == 0) {
						t.Errorf("JSON line lacks %q: %s", k, line)
					}
				}
				if r.LeakedENIs != 0 || r.DuplicateIPs != 0 || r.PodIPsNotOnNode != 0 {
					t.Errorf("leaked ENIs %d, duplicate IPs %d, pod IPs off their node %d; want none (%s)", r.LeakedENIs,
						r.DuplicateIPs, r.PodIPsNotOnNode, line)
				}
				if r.PodsWanted == 0 || r.LowerBoundSeconds <= 0 {
					t.Fatalf("no pods or no lower bound: %s", line)
				}
				if st == fleet.Eniwire {
					for _, miss := range fleet.Misses(r) {
						t.Errorf("eniwire missed a target: %s (%s)", miss, line)
					}
					if r.ConvergeSeconds < r.LowerBoundSeconds {
						t.Errorf("all pods addressed in %.1fs, faster than the lower bound %.1fs: the bound is wrong", r.ConvergeSeconds, r.LowerBoundSeconds)
					}
				}
				if sc == fleet.RolloutPrefix {
					if !r.Converged || r.PodsStarted != nodes*110 {
						t.Errorf("started %d of %d pods", r.PodsStarted, nodes*110)
					}
					if r.EC2CallsPerPod > 0.2 {
						t.Errorf("%.3f EC2 calls per pod; prefixes should need far fewer", r.EC2CallsPerPod)
					}
					return
				}
				fr := r.Fragmentation
				if fr == nil || fr.FreePrefixes != 0 || fr.FreeAddrs < r.PodsWanted {
					t.Fatalf("the subnet is not fragmented as the scenario says: %+v", fr)
				}
				switch st {
				case fleet.Eniwire:
					if r.InsufficientCidr < nodes || r.InsufficientCidr > 2*nodes {
						t.Errorf("%d prefix calls refused; want about one per node before the fallback", r.InsufficientCidr)
					}
				case fleet.VPCCNI:
					if r.PodsStuck != r.PodsWanted {
						t.Errorf("%d of %d pods stuck; with no free /28 and no fallback all should be", r.PodsStuck, r.PodsWanted)
					}
					if r.InsufficientCidr < 2*nodes {
						t.Errorf("%d prefix calls refused; every node should retry after 120 s", r.InsufficientCidr)
					}
				}
			})
		}
	}
}
