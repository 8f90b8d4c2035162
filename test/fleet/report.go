package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// TargetRatio is the most converge_seconds may exceed lower_bound_seconds for eniwire's rollout.
const TargetRatio = 1.25

// Misses lists the targets an eniwire result misses: no leaked ENI, no AttachmentLimitExceeded, no duplicate
// IP, every node converged, and for the rollout converge_seconds <= 1.25 x lower_bound_seconds. Legacy results
// have no targets.
func Misses(r Result) []string {
	if r.Strategy != string(Eniwire) {
		return nil
	}
	var out []string
	if r.LeakedENIs != 0 {
		out = append(out, fmt.Sprintf("leaked_enis %d", r.LeakedENIs))
	}
	if r.AttachLimit != 0 {
		out = append(out, fmt.Sprintf("attachment_limit_exceeded %d", r.AttachLimit))
	}
	if r.DuplicateIPs != 0 {
		out = append(out, fmt.Sprintf("duplicate_ip_assignments %d", r.DuplicateIPs))
	}
	if r.PodIPsNotOnNode != 0 {
		out = append(out, fmt.Sprintf("pod_ips_not_on_node %d", r.PodIPsNotOnNode))
	}
	if r.PodsWanted > 0 && !r.Converged {
		out = append(out, fmt.Sprintf("pods_stuck %d of %d", r.PodsStuck, r.PodsWanted))
		return out
	}
	if !r.Converged {
		out = append(out, fmt.Sprintf("not converged (%d/%d nodes)", r.ConvergedNodes, r.Nodes))
	}
	if r.Scenario == string(Rollout) && r.Converged && r.ConvergeSeconds > TargetRatio*r.LowerBoundSeconds {
		out = append(out, fmt.Sprintf("converge_seconds %.0f > %.2f x lower bound %.0f", r.ConvergeSeconds, TargetRatio, r.LowerBoundSeconds))
	}
	return out
}

// WriteTable prints the results for people: the ENI scenarios in one table, the prefix scenarios' pods in
// another.
func WriteTable(w io.Writer, rs []Result) error {
	var enis, pods []Result
	for _, r := range rs {
		if r.PodsWanted > 0 {
			pods = append(pods, r)
		} else {
			enis = append(enis, r)
		}
	}
	if len(enis) > 0 {
		if err := writeENITable(w, enis); err != nil {
			return err
		}
	}
	if len(pods) > 0 {
		return writePodTable(w, pods)
	}
	return nil
}

func verdict(r Result) string {
	if r.Strategy != string(Eniwire) {
		return "-"
	}
	if m := Misses(r); len(m) > 0 {
		return fmt.Sprintf("MISSED: %v", m)
	}
	return "met"
}

// writePodTable prints the prefix scenarios: when the last pod got its IP against the bound, the pods started in
// the first minutes and stuck at the end, EC2 calls per pod, and the calls the subnet refused.
func writePodTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tscenario\tnodes\tpods\tall addressed s\tlower bound s\tratio\tpods/min, min 1-5\tstuck\tec2 calls\tcalls/pod\tthrottled\tno /28 refusals\tdescribes: to all addressed, in all (needed)\tADDs answered no IP\tleaked\tdup IPs\tIP off node\twall s\ttargets\t")
	for _, r := range rs {
		calls := r.TotalEC2Calls()
		conv, ratio := fmt.Sprintf("never (%d left)", r.PodsStuck), "-"
		if r.Converged {
			conv, ratio = fmt.Sprintf("%.0f", r.ConvergeSeconds), fmt.Sprintf("%.2f", r.Ratio)
		}
		strategy := r.Strategy
		if r.MinimumIPTarget > 0 {
			strategy += fmt.Sprintf(" (MINIMUM_IP_TARGET=%d)", r.MinimumIPTarget)
		}
		var perMin []string
		for i := 0; i < 5 && i < len(r.PodsPerMinute); i++ {
			perMin = append(perMin, fmt.Sprint(r.PodsPerMinute[i]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.0f\t%s\t%s\t%d\t%d\t%.3f\t%d\t%d\t%d, %d (%d)\t%d\t%d\t%d\t%d\t%.0f\t%s\t\n", strategy, r.Scenario,
			r.Nodes, r.PodsWanted, conv, r.LowerBoundSeconds, ratio, strings.Join(perMin, " "), r.PodsStuck, calls, r.EC2CallsPerPod,
			r.ThrottledCalls, r.InsufficientCidr, r.DescribesToAddressed, r.EC2Calls["DescribeNetworkInterfaces"], r.CallsNeeded["DescribeNetworkInterfaces"], r.AddsNoIP, r.LeakedENIs, r.DuplicateIPs, r.PodIPsNotOnNode, r.WallSeconds, verdict(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Scenario == string(Exhausted) {
			fmt.Fprintf(w, "%s/%s: the node subnets ran out at %.0fs; %d ENIs went to the discovered pod subnets\n",
				r.Strategy, r.Scenario, r.ExhaustedAtSeconds, r.ENIsInPodSubnets)
		}
		fmt.Fprintln(w, paceLine(r))
		if len(r.DescribesByCause) > 0 {
			fmt.Fprintf(w, "%s/%s: DescribeNetworkInterfaces by cause: %s\n", r.Strategy, r.Scenario,
				strings.Join(describeCauseLines(r.DescribesByCause), "; "))
		}
		if len(r.DescribesByCauseToAddressed) > 0 {
			fmt.Fprintf(w, "%s/%s: DescribeNetworkInterfaces by cause until every pod had its IP: %s\n", r.Strategy, r.Scenario,
				strings.Join(describeCauseLines(r.DescribesByCauseToAddressed), "; "))
		}
		if fr := r.Fragmentation; fr != nil {
			fmt.Fprintf(w, "%s/%s: %d legacy nodes (%s) held %d single IPs; %d addresses and %d aligned /28s were free at the start\n",
				r.Strategy, r.Scenario, fr.Nodes, fillType, fr.IPs, fr.FreeAddrs, fr.FreePrefixes)
		}
	}
	_, err := fmt.Fprintln(w, PodLowerBoundMethod)
	return err
}

// writeENITable prints the ENI scenarios.
func writeENITable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tscenario\tnodes\tconverge s\tlower bound s\tratio\tec2 calls\tthrottled\tattach limit\tleaked\tno DoT\tdup IPs\tkills\twall s\ttargets\t")
	for _, r := range rs {
		calls := r.TotalEC2Calls()
		conv, ratio := "never", "-"
		if r.Converged || r.ConvergeSeconds >= 0 {
			conv = fmt.Sprintf("%.0f", r.ConvergeSeconds)
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		if !r.Converged {
			conv = fmt.Sprintf("never (%d/%d)", r.ConvergedNodes, r.Nodes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.0f\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%s\t\n", r.Strategy, r.Scenario, r.Nodes, conv,
			r.LowerBoundSeconds, ratio, calls, r.ThrottledCalls, r.AttachLimit, r.LeakedENIs, r.MissingDoT, r.DuplicateIPs, r.Kills,
			r.WallSeconds, verdict(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		fmt.Fprintln(w, paceLine(r))
	}
	_, err := fmt.Fprintln(w, LowerBoundMethod)
	return err
}

// paceLine says how fast virtual time ran in r.
func paceLine(r Result) string {
	if r.SpeedupEffective == 0 {
		return fmt.Sprintf("%s/%s: virtual time at a fixed speed-up of %.0f", r.Strategy, r.Scenario, r.Speedup)
	}
	return fmt.Sprintf("%s/%s: virtual time at up to %.0f x the wall clock, %.1f x on average, %.1f x at the slowest, "+
		"below %.0f for %.0f%% of the wall time (paced by the goroutines waiting for a CPU)", r.Strategy, r.Scenario,
		r.Speedup, r.SpeedupEffective, r.SpeedupLeast, r.Speedup, 100*r.SlowShare)
}

// WriteJSON prints one JSON object per result, each on its own line.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("encoding result %s/%s: %w", r.Strategy, r.Scenario, err)
		}
	}
	return nil
}
