package fleet

import (
	"encoding/json"
	"fmt"
	"io"
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
	if !r.Converged {
		out = append(out, fmt.Sprintf("not converged (%d/%d nodes)", r.ConvergedNodes, r.Nodes))
	}
	if r.Scenario == string(Rollout) && r.Converged && r.ConvergeSeconds > TargetRatio*r.LowerBoundSeconds {
		out = append(out, fmt.Sprintf("converge_seconds %.0f > %.2f x lower bound %.0f", r.ConvergeSeconds, TargetRatio, r.LowerBoundSeconds))
	}
	return out
}

// WriteTable prints the results for people.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tscenario\tnodes\tconverge s\tlower bound s\tratio\tec2 calls\tthrottled\tattach limit\tleaked\tno DoT\tdup IPs\tkills\twall s\ttargets\t")
	for _, r := range rs {
		var calls int64
		for _, n := range r.EC2Calls {
			calls += n
		}
		conv, ratio := "never", "-"
		if r.Converged || r.ConvergeSeconds >= 0 {
			conv = fmt.Sprintf("%.0f", r.ConvergeSeconds)
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		if !r.Converged {
			conv = fmt.Sprintf("never (%d/%d)", r.ConvergedNodes, r.Nodes)
		}
		verdict := "-"
		if r.Strategy == string(Eniwire) {
			verdict = "met"
			if m := Misses(r); len(m) > 0 {
				verdict = fmt.Sprintf("MISSED: %v", m)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.0f\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%s\t\n", r.Strategy, r.Scenario, r.Nodes, conv,
			r.LowerBoundSeconds, ratio, calls, r.ThrottledCalls, r.AttachLimit, r.LeakedENIs, r.MissingDoT, r.DuplicateIPs, r.Kills,
			r.WallSeconds, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, LowerBoundMethod)
	return err
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
