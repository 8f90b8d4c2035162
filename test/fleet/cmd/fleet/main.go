// Command fleet runs the fleet simulation: N node controllers against one simulated EC2 account with AWS's
// throttling, per scenario, for eniwire and the seed's legacy strategy (rollout, churn, chaos) or a model of the
// AWS VPC CNI in prefix mode (rollout-prefix, fragmented), and prints a table and JSON lines. It exits 1 when
// eniwire misses a target.
//
// Diagnostics, on stderr: FLEET_TRACE=1 prints every 3 virtual seconds the calls that succeeded and were
// throttled per ENI action and the settled nodes (and the state of the last unsettled ones); FLEET_DEBUG_LEAKS=1
// prints each leaked ENI with its owner and the owner's record of it. -speedup is the most virtual
// seconds per wall second (fleet.DefaultSpeedup); virtual time runs slower while the fleet's goroutines wait for a
// CPU (-fixed-pace: not).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/eniwire/eniwire/test/fleet"
)

func main() {
	nodes := flag.Int("nodes", 300, "nodes in the fleet")
	scenarios := flag.String("scenarios", "rollout,churn,chaos", "scenarios to run, comma-separated: rollout, churn, chaos, "+
		"rollout-prefix, fragmented, exhausted")
	strategies := flag.String("strategies", "", "strategies to run, comma-separated (default: eniwire,legacy for rollout, "+
		"churn and chaos; eniwire,vpc-cni for rollout-prefix and fragmented)")
	pods := flag.Int("pods", 110, "pods per node in rollout-prefix")
	minIP := flag.Int("minimum-ip-target", 0, "eniwire nodes' MINIMUM_IP_TARGET in rollout-prefix and fragmented (0: unset, "+
		"WARM_PREFIX_TARGET=1 governs)")
	speedup := flag.Float64("speedup", 0, "virtual seconds per wall second at most (0: 20); virtual time slows while the "+
		"fleet's goroutines wait for a CPU")
	fixedPace := flag.Bool("fixed-pace", false, "keep virtual time at -speedup however late the fleet's goroutines run "+
		"(the harness before its pacer: a loaded machine makes the fleet look slower than it is)")
	seed := flag.Int64("seed", 1, "seed of the simulator and the scenarios")
	maxAttempts := flag.Int("ec2-max-attempts", 0, "eniwire EC2 client attempts per call under throttling (0: the product default)")
	jsonOnly := flag.Bool("json", false, "print only the JSON lines")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	var results []fleet.Result
	for _, sc := range strings.Split(*scenarios, ",") {
		sc = strings.TrimSpace(sc)
		sts := *strategies
		if sts == "" {
			sts = "eniwire,legacy"
			if sc == string(fleet.RolloutPrefix) || sc == string(fleet.Fragmented) {
				sts = "eniwire,vpc-cni"
			}
			if sc == string(fleet.Exhausted) {
				sts = "eniwire"
			}
		}
		for _, st := range strings.Split(sts, ",") {
			opts := fleet.Options{Nodes: *nodes, Speedup: *speedup, FixedPace: *fixedPace, Seed: *seed, Progress: os.Stderr,
				PodsPerNode: *pods, MinimumIPTarget: *minIP}
			opts.EC2Config.MaxAttempts = *maxAttempts
			r, err := fleet.Run(ctx, opts, fleet.Strategy(strings.TrimSpace(st)), fleet.Scenario(strings.TrimSpace(sc)))
			if err != nil {
				fmt.Fprintf(os.Stderr, "fleet: %s/%s: %v\n", st, sc, err)
				os.Exit(2)
			}
			fmt.Fprintf(os.Stderr, "fleet: %s/%s done in %.0fs wall: ", st, sc, r.WallSeconds)
			_ = fleet.WriteJSON(os.Stderr, []fleet.Result{r}) // kept should a later run not end
			results = append(results, r)
		}
	}
	if !*jsonOnly {
		_ = fleet.WriteTable(os.Stdout, results)
	}
	_ = fleet.WriteJSON(os.Stdout, results)
	fmt.Fprintf(os.Stderr, "fleet: total wall time %.0fs\n", time.Since(start).Seconds())
	missed := false
	for _, r := range results {
		for _, m := range fleet.Misses(r) {
			fmt.Fprintf(os.Stderr, "fleet: eniwire missed a target in %s: %s\n", r.Scenario, m)
			missed = true
		}
	}
	if missed {
		os.Exit(1)
	}
}
