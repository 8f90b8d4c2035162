// Command dpbench compares eniwire's datapath with the AWS VPC CNI's ip-rule scheme and a plain routed
// veth in network namespaces, and eniwire's NetworkPolicy enforcement with none and with
// kube-network-policies', and prints the method, tables and JSON lines. It needs root, bpffs, ip, nft and
// iperf3. `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/eniwire/eniwire/test/dpbench"
)

func main() {
	var (
		opts  dpbench.Options
		sizes = flag.String("sizes", "1,100,1000,10000", "pods in the policy, comma-separated, ascending")
		jsonl = flag.String("json", "", "also write the JSON lines to this file (they always follow the table on stdout)")
	)
	flag.IntVar(&opts.Repeats, "repeats", 3, "runs per (scheme, size); figures are medians")
	flag.DurationVar(&opts.TCPDuration, "tcp", 0, "iperf3 duration (default 3s)")
	flag.DurationVar(&opts.RRDuration, "rr", 0, "UDP request/response duration per run (default 2s)")
	flag.IntVar(&opts.ProgRepeat, "prog-repeat", 0, "packets per BPF_PROG_TEST_RUN of from_pod (default 1000000)")
	flag.StringVar(&opts.KNP, "knp", "", "the built test/dpbench/knp command: adds the kube-network-policies policy rows")
	flag.IntVar(&opts.PolicyRepeats, "policy-repeats", 7, "runs per enforcer in the policy rows; ratios are medians")
	flag.BoolVar(&opts.PolicyOnly, "policy-only", false, "run the NetworkPolicy rows alone (10-20 s a repeat)")
	flag.Parse()
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "dpbench: bad size %q\n", f)
			os.Exit(2)
		}
		opts.Sizes = append(opts.Sizes, n)
	}
	opts.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, *jsonl); err != nil {
		fmt.Fprintf(os.Stderr, "dpbench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts dpbench.Options, jsonPath string) error {
	rep, err := dpbench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	fmt.Println()
	if err := rep.WriteJSONLines(os.Stdout); err != nil {
		return err
	}
	if jsonPath == "" {
		return nil
	}
	f, err := os.Create(jsonPath)
	if err != nil {
		return fmt.Errorf("creating %s: %w", jsonPath, err)
	}
	if err := rep.WriteJSONLines(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", jsonPath, err)
	}
	return f.Close()
}
