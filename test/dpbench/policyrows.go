package dpbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// PolicySample is one measurement of the policy rows: the pod's flows to the VPC host under one enforcer.
type PolicySample struct {
	Enforcer string
	Repeat   int
	TCP      TCPResult
	CRR      CRRResult
}

// PolicyRow is the summary of one enforcer: medians of its samples, and medians of the per-repeat ratios
// against no policy.
type PolicyRow struct {
	Enforcer    string  `json:"enforcer"`
	TCPGbps     float64 `json:"tcp_gbps"`
	TCPRatio    float64 `json:"tcp_vs_none"`
	CRRRate     float64 `json:"tcp_crr_per_s"`
	CRRRatio    float64 `json:"tcp_crr_vs_none"`
	CRRP50us    float64 `json:"tcp_crr_p50_us"`
	CRRP50Ratio float64 `json:"tcp_crr_p50_vs_none"` // none's p50 over the enforcer's: below 1 is slower
	CRRP99us    float64 `json:"tcp_crr_p99_us"`
	Repeats     int     `json:"repeats"`
}

// Targets of the policy rows (issue 24): eniwire with a policy allowing the flow against no policy.
const (
	policyTCPTarget = 0.95
	policyCRRTarget = 0.90
)

// policyBench is the policy rows' topology with eniwire installed as the agent runs it (NetworkPolicy on),
// the VPC host's servers, and the enforcers to measure.
type policyBench struct {
	topo      *Topology
	enforcers []Enforcer
	closers   []func() error
}

// newPolicyBench builds it; the kube-network-policies enforcer is there when knp (its built command) is
// not empty. Close removes everything, pinBase included.
func newPolicyBench(ctx context.Context, prefix, pinBase, knp string) (pb *policyBench, err error) {
	pb = &policyBench{closers: []func() error{func() error { return os.RemoveAll(pinBase) }}}
	defer func() {
		if err != nil {
			_ = pb.Close()
			pb = nil
		}
	}()
	if pb.topo, err = NewTopology(ctx, prefix); err != nil {
		return pb, fmt.Errorf("building the topology of the policy rows: %w", err)
	}
	pb.closers = append(pb.closers, pb.topo.Close)
	// One connection per transaction: the client's closed ports wait in TIME_WAIT, and a run opens tens of
	// thousands; reusing them (as a busy client does) keeps the run from running out.
	if err := pb.topo.sysctls(pb.topo.Pod, map[string]string{"net/ipv4/tcp_tw_reuse": "1", "net/ipv4/ip_local_port_range": "1024 65535"}); err != nil {
		return pb, err
	}
	servers, err := StartServers(ctx, pb.topo)
	if err != nil {
		return pb, fmt.Errorf("starting the servers of the policy rows: %w", err)
	}
	pb.closers = append(pb.closers, servers.Close)
	ew := &Eniwire{PinRoot: filepath.Join(pinBase, "v1"), NetworkPolicy: true}
	if err := ew.Install(ctx, pb.topo); err != nil {
		return pb, fmt.Errorf("installing eniwire for the policy rows: %w", err)
	}
	pb.closers = append(pb.closers, ew.Close)
	pb.enforcers = []Enforcer{NoPolicy{}, &EniwirePolicy{Datapath: ew}}
	if knp != "" {
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			return pb, err
		}
		pb.closers = append(pb.closers, func() error { return os.RemoveAll(dir) })
		k := &KubeNetworkPolicies{Binary: knp, Dir: dir}
		pb.closers = append(pb.closers, k.Close)
		pb.enforcers = append(pb.enforcers, k)
	}
	if err := Reach(ctx, pb.topo, Direct, 5*time.Second); err != nil {
		return pb, fmt.Errorf("policy rows: %w", err)
	}
	return pb, nil
}

// Close undoes newPolicyBench, last step first.
func (pb *policyBench) Close() error {
	var errs []error
	for i := len(pb.closers) - 1; i >= 0; i-- {
		errs = append(errs, pb.closers[i]())
	}
	return errors.Join(errs...)
}

// runPolicyRows measures every enforcer of a new policyBench PolicyRepeats times, rotating their order in each
// repeat. The kube-network-policies rows need opts.KNP.
func runPolicyRows(ctx context.Context, prefix, pinBase string, opts Options) (samples []PolicySample, err error) {
	pb, err := newPolicyBench(ctx, prefix, pinBase, opts.KNP)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := pb.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("tearing down the policy rows: %w", cerr)
		}
	}()
	for r := range opts.PolicyRepeats {
		for j := range pb.enforcers {
			s, err := measurePolicy(ctx, pb.topo, pb.enforcers[(r+j)%len(pb.enforcers)], r, opts)
			if err != nil {
				return nil, err
			}
			samples = append(samples, s)
			fmt.Fprintf(opts.Progress, "dpbench: policy %-21s repeat=%d  %6.2f Gbit/s  %8.0f TCP CRR/s  p50 %s\n",
				s.Enforcer, r, s.TCP.Gbps, s.CRR.Rate, s.CRR.P50.Round(100*time.Nanosecond))
		}
	}
	return samples, nil
}

// measurePolicy puts e's policy in force, measures the TCP stream and the connect/request/close rate, and
// lifts the policy.
func measurePolicy(ctx context.Context, t *Topology, e Enforcer, repeat int, opts Options) (s PolicySample, err error) {
	if err := e.Enforce(ctx, t); err != nil {
		return PolicySample{}, fmt.Errorf("enforcing the policy with %s: %w", e.Name(), err)
	}
	defer func() {
		if lerr := e.Lift(ctx, t); lerr != nil && err == nil {
			err = fmt.Errorf("lifting the policy of %s: %w", e.Name(), lerr)
		}
	}()
	tcp, err := TCPThroughput(ctx, t, Direct, opts.TCPDuration)
	if err != nil {
		return PolicySample{}, fmt.Errorf("policy rows, %s: %w", e.Name(), err)
	}
	crr, err := TCPConnectRequestClose(ctx, t, crrTarget, opts.RRDuration)
	if err != nil {
		return PolicySample{}, fmt.Errorf("policy rows, %s: %w", e.Name(), err)
	}
	return PolicySample{Enforcer: e.Name(), Repeat: repeat, TCP: tcp, CRR: crr}, nil
}

// summarizePolicy makes one row per enforcer that was run: none, eniwire, kube-network-policies.
func (r *Report) summarizePolicy() {
	base := map[int]PolicySample{} // no policy's sample in the same repeat
	for _, s := range r.PolicySamples {
		if s.Enforcer == (NoPolicy{}).Name() {
			base[s.Repeat] = s
		}
	}
	r.PolicyRows = nil
	for _, name := range []string{NoPolicy{}.Name(), (&EniwirePolicy{}).Name(), (&KubeNetworkPolicies{}).Name()} {
		row := PolicyRow{Enforcer: name}
		var tcp, tcpR, crr, crrR, p50, p50R, p99 []float64
		for _, s := range r.PolicySamples {
			if s.Enforcer != name {
				continue
			}
			tcp, crr = append(tcp, s.TCP.Gbps), append(crr, s.CRR.Rate)
			p50, p99 = append(p50, us(s.CRR.P50)), append(p99, us(s.CRR.P99))
			if b := base[s.Repeat]; b.TCP.Gbps > 0 && b.CRR.Rate > 0 {
				tcpR, crrR = append(tcpR, s.TCP.Gbps/b.TCP.Gbps), append(crrR, s.CRR.Rate/b.CRR.Rate)
				p50R = append(p50R, float64(b.CRR.P50)/float64(s.CRR.P50))
			}
			row.Repeats++
		}
		if row.Repeats == 0 {
			continue
		}
		row.TCPGbps, row.TCPRatio, row.CRRRate, row.CRRRatio = median(tcp), median(tcpR), median(crr), median(crrR)
		row.CRRP50us, row.CRRP50Ratio, row.CRRP99us = median(p50), median(p50R), median(p99)
		r.PolicyRows = append(r.PolicyRows, row)
	}
}

// policyRow finds an enforcer's summary row; the zero row when it was not run.
func (r *Report) policyRow(enforcer string) PolicyRow {
	for _, row := range r.PolicyRows {
		if row.Enforcer == enforcer {
			return row
		}
	}
	return PolicyRow{}
}

// writePolicyTable prints the policy rows, the verdict on eniwire's targets and the two enforcers' ratios
// side by side.
func (r *Report) writePolicyTable(b *strings.Builder) error {
	fmt.Fprintf(b, "\nNetworkPolicy (policy rows, k=%d): the pod's flows to vpchost under a policy allowing them, against no policy, same run:\n\n", r.Options.PolicyRepeats)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "enforcer\tTCP Gbit/s\tvs none\tTCP CRR/s\tvs none\tCRR p50 µs\tvs none\tCRR p99 µs\t")
	for _, row := range r.PolicyRows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f\t%.2f\t%.1f\t%.2f\t%.1f\t\n", row.Enforcer, row.TCPGbps, row.TCPRatio,
			row.CRRRate, row.CRRRatio, row.CRRP50us, row.CRRP50Ratio, row.CRRP99us)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ew := r.policyRow((&EniwirePolicy{}).Name())
	verdict := func(got, target float64) string {
		if got >= target {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(b, "\nTarget eniwire's policy / none: TCP stream ≥ %.2f: %.2f %s; TCP CRR ≥ %.2f: %.2f %s.\n",
		policyTCPTarget, ew.TCPRatio, verdict(ew.TCPRatio, policyTCPTarget), policyCRRTarget, ew.CRRRatio, verdict(ew.CRRRatio, policyCRRTarget))
	knp := r.policyRow((&KubeNetworkPolicies{}).Name())
	if knp.Repeats == 0 {
		b.WriteString("kube-network-policies: not run (dpbench -knp names the built test/dpbench/knp command).\n")
		return nil
	}
	fmt.Fprintf(b, "Side by side, policy / none: TCP stream eniwire %.2f, kube-network-policies %.2f; TCP CRR eniwire %.2f, kube-network-policies %.2f; CRR p50 eniwire %.2f, kube-network-policies %.2f.\n",
		ew.TCPRatio, knp.TCPRatio, ew.CRRRatio, knp.CRRRatio, ew.CRRP50Ratio, knp.CRRP50Ratio)
	return nil
}

// writePolicyJSONLines prints a "policy_summary" line per enforcer and a "policy_sample" per sample.
func (r *Report) writePolicyJSONLines(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, row := range r.PolicyRows {
		if err := enc.Encode(struct {
			Kind string `json:"kind"`
			PolicyRow
		}{"policy_summary", row}); err != nil {
			return err
		}
	}
	for _, s := range r.PolicySamples {
		if err := enc.Encode(map[string]any{
			"kind": "policy_sample", "enforcer": s.Enforcer, "repeat": s.Repeat,
			"tcp_gbps": s.TCP.Gbps, "tcp_retransmits": s.TCP.Retransmits,
			"tcp_crr_per_s": s.CRR.Rate, "tcp_crr_transactions": s.CRR.Transactions,
			"tcp_crr_p50_us": us(s.CRR.P50), "tcp_crr_p99_us": us(s.CRR.P99),
		}); err != nil {
			return err
		}
	}
	return nil
}

// BuildKNP builds the knp command (the module in dir, test/dpbench/knp) into out.
func BuildKNP(ctx context.Context, dir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w: %s", dir, err, strings.TrimSpace(string(b)))
	}
	return nil
}
