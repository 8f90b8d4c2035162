package dpbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Options choose the size of a run. The zero value is the full benchmark.
type Options struct {
	Sizes   []int // pods in the policy; default 1, 100, 1000, 10000
	Repeats int   // runs per (scheme, size), interleaved; default 3
	// PolicyRepeats is how many times the policy rows measure each enforcer, interleaved; default 7. A
	// single TCP stream on these veths swings by up to 2 × between runs, so their ratios need more
	// repeats than the pod-count rows' (docs/benchmarks.md, the policy rows).
	PolicyRepeats int
	TCPDuration   time.Duration // iperf3 -t; default 3s
	RRDuration    time.Duration // UDP ping-pong per run; default 2s
	ProgRepeat    int           // packets per BPF_PROG_TEST_RUN; default 1,000,000
	KNP           string        // the built knp command (BuildKNP); empty: no kube-network-policies rows
	PolicyOnly    bool          // the policy rows alone: no pod-count, Service or IPv6 rows
	Progress      io.Writer     // one line per step; nothing when nil
}

func (o Options) withDefaults() Options {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1, 100, 1000, 10000}
	}
	if o.Repeats <= 0 {
		o.Repeats = 3
	}
	if o.PolicyRepeats <= 0 {
		o.PolicyRepeats = 7
	}
	if o.TCPDuration <= 0 {
		o.TCPDuration = 3 * time.Second
	}
	if o.RRDuration <= 0 {
		o.RRDuration = 2 * time.Second
	}
	if o.ProgRepeat <= 0 {
		o.ProgRepeat = 1_000_000
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// bench is one scheme on its own topology.
type bench struct {
	scheme  Scheme
	topo    *Topology
	servers *Servers
}

// Run builds one topology per scheme (identical links, addresses and MTU), grows every scheme through
// the sizes in ascending order and, at each size, measures every scheme Repeats times, rotating the order
// of the schemes in each repeat so that drift on a noisy machine falls on all of them alike. In each repeat,
// after the direct measurements, eniwire and plain are measured through the Service (service.go), then over
// IPv6 on topologies of their own (topology6.go), each in rotated order. Last come the policy rows (policyrows.go), on a topology of their own.
func Run(ctx context.Context, opts Options) (rep *Report, err error) {
	opts = opts.withDefaults()
	start, load := time.Now(), loadAvg()
	prefix := UniquePrefix("bench")
	pinBase := filepath.Join("/sys/fs/bpf", prefix)
	if opts.PolicyOnly {
		defer os.RemoveAll(pinBase)
		return runPolicyOnly(ctx, prefix, pinBase, opts, start, load)
	}
	ew := &Eniwire{PinRoot: filepath.Join(pinBase, "v1")}
	var benches, serviced, ipv6 []*bench
	defer func() {
		var errs []error
		for _, b := range append(benches, ipv6...) {
			if b.servers != nil {
				errs = append(errs, b.servers.Close())
			}
			errs = append(errs, b.scheme.Close(), b.topo.Close())
		}
		_ = os.RemoveAll(pinBase)
		if cerr := errors.Join(errs...); cerr != nil && err == nil {
			err = fmt.Errorf("tearing down: %w", cerr)
		}
	}()
	for i, s := range []Scheme{ew, &VPCCNI{}, Plain{}} {
		topo, err := NewTopology(ctx, fmt.Sprintf("%s-%c", prefix, 'a'+i))
		if err != nil {
			return nil, fmt.Errorf("building the topology of %s: %w", s.Name(), err)
		}
		b := &bench{scheme: s, topo: topo}
		benches = append(benches, b)
		if s.Name() != (&VPCCNI{}).Name() {
			// The Service rows compare eniwire with the floor; the VPC CNI's Service path is the same
			// host DNAT behind its rules.
			serviced = append(serviced, b)
		}
		if b.servers, err = StartServers(ctx, topo); err != nil {
			return nil, fmt.Errorf("starting the servers of %s: %w", s.Name(), err)
		}
		if err := s.Install(ctx, topo); err != nil {
			return nil, fmt.Errorf("installing %s: %w", s.Name(), err)
		}
	}
	// The IPv6 rows: eniwire as in IPv6 mode and the plain routed veth, each on an IPv6 topology of its own.
	for i, s := range []Scheme{&Eniwire{PinRoot: filepath.Join(pinBase, "v6")}, Plain{}} {
		topo, err := NewIPv6Topology(ctx, fmt.Sprintf("%s-6%c", prefix, 'a'+i))
		if err != nil {
			return nil, fmt.Errorf("building the IPv6 topology of %s: %w", s.Name(), err)
		}
		b := &bench{scheme: s, topo: topo}
		ipv6 = append(ipv6, b)
		if b.servers, err = StartServers(ctx, topo); err != nil {
			return nil, fmt.Errorf("starting the IPv6 servers of %s: %w", s.Name(), err)
		}
		if err := s.Install(ctx, topo); err != nil {
			return nil, fmt.Errorf("installing %s on IPv6: %w", s.Name(), err)
		}
	}
	rep = &Report{Options: opts, LoadStart: load}
	for _, pods := range opts.Sizes {
		for _, b := range benches {
			if err := grow(ctx, b, Direct, pods, rep, opts.Progress); err != nil {
				return nil, err
			}
		}
		for _, b := range ipv6 {
			if err := grow(ctx, b, Direct6, pods, rep, opts.Progress); err != nil {
				return nil, err
			}
		}
		for r := range opts.Repeats {
			for j := range benches {
				s, err := measure(ctx, benches[(r+j)%len(benches)], Direct, pods, r, opts)
				if err != nil {
					return nil, err
				}
				rep.add(s, opts.Progress)
			}
			for j := range serviced {
				s, err := measureService(ctx, serviced[(r+j)%len(serviced)], pods, r, opts)
				if err != nil {
					return nil, err
				}
				rep.add(s, opts.Progress)
			}
			for j := range ipv6 {
				s, err := measure(ctx, ipv6[(r+j)%len(ipv6)], Direct6, pods, r, opts)
				if err != nil {
					return nil, err
				}
				rep.add(s, opts.Progress)
			}
			per, err := ew.FromPodCost(opts.ProgRepeat)
			if err != nil {
				return nil, fmt.Errorf("measuring from_pod with %d pods: %w", pods, err)
			}
			rep.Prog = append(rep.Prog, ProgSample{Pods: pods, Repeat: r, PerPacket: per})
		}
	}
	if rep.PolicySamples, err = runPolicyRows(ctx, prefix+"-p", filepath.Join(pinBase, "policy"), opts); err != nil {
		return nil, err
	}
	rep.Wall, rep.LoadEnd = time.Since(start), loadAvg()
	rep.summarize()
	rep.summarizePolicy()
	return rep, nil
}

// grow makes b's scheme carry pods pods, checks that the pod still reaches to, and records the setup.
func grow(ctx context.Context, b *bench, to Target, pods int, rep *Report, progress io.Writer) error {
	t0 := time.Now()
	if err := b.scheme.Grow(ctx, b.topo, pods); err != nil {
		return fmt.Errorf("growing %s to %d pods: %w", b.scheme.Name(), pods, err)
	}
	took := time.Since(t0)
	rules, err := b.topo.RuleCount()
	if err != nil {
		return err
	}
	if err := Reach(ctx, b.topo, to, 5*time.Second); err != nil {
		return fmt.Errorf("%s with %d pods: %w", b.scheme.Name(), pods, err)
	}
	rep.Setups = append(rep.Setups, Setup{Scheme: b.scheme.Name(), Target: to.Name, Pods: pods, Rules: rules, Grow: took})
	fmt.Fprintf(progress, "dpbench: %s (to %s) grown to %d pods in %s (%d ip rules)\n", b.scheme.Name(), to.Name, pods, took.Round(time.Millisecond), rules)
	return nil
}

// add records a sample and reports it on w.
func (r *Report) add(s Sample, w io.Writer) {
	r.Samples = append(r.Samples, s)
	fmt.Fprintf(w, "dpbench: %-7s to %-7s pods=%-5d repeat=%d  %6.2f Gbit/s  %8.0f transactions/s  p50 %s\n",
		s.Scheme, s.Target, s.Pods, s.Repeat, s.TCP.Gbps, s.RR.Rate, s.RR.P50.Round(100*time.Nanosecond))
}

func measure(ctx context.Context, b *bench, to Target, pods, repeat int, opts Options) (Sample, error) {
	tcp, err := TCPThroughput(ctx, b.topo, to, opts.TCPDuration)
	if err != nil {
		return Sample{}, fmt.Errorf("%s to %s with %d pods: %w", b.scheme.Name(), to.Name, pods, err)
	}
	rr, err := UDPRoundTrips(ctx, b.topo, to, opts.RRDuration)
	if err != nil {
		return Sample{}, fmt.Errorf("%s to %s with %d pods: %w", b.scheme.Name(), to.Name, pods, err)
	}
	return Sample{Scheme: b.scheme.Name(), Target: to.Name, Pods: pods, Repeat: repeat, TCP: tcp, RR: rr}, nil
}

// measureService measures b through the Service, programmed into its node for this measurement only.
func measureService(ctx context.Context, b *bench, pods, repeat int, opts Options) (s Sample, err error) {
	if err := AddService(ctx, b.topo); err != nil {
		return Sample{}, err
	}
	defer func() {
		if rerr := RemoveService(ctx, b.topo); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err := Reach(ctx, b.topo, Service, 5*time.Second); err != nil {
		return Sample{}, fmt.Errorf("%s with %d pods: %w", b.scheme.Name(), pods, err)
	}
	return measure(ctx, b, Service, pods, repeat, opts)
}

// runPolicyOnly is Run with the policy rows alone.
func runPolicyOnly(ctx context.Context, prefix, pinBase string, opts Options, start time.Time, load float64) (*Report, error) {
	rep := &Report{Options: opts, LoadStart: load}
	var err error
	if rep.PolicySamples, err = runPolicyRows(ctx, prefix+"-p", filepath.Join(pinBase, "policy"), opts); err != nil {
		return nil, err
	}
	rep.Wall, rep.LoadEnd = time.Since(start), loadAvg()
	rep.summarizePolicy()
	return rep, nil
}
