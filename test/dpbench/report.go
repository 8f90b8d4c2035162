package dpbench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Method is printed above the figures, so that a table never travels without what it measured.
const Method = `Method (test/dpbench): one topology per scheme, identical links, addresses and MTU 1500:
  pod --veth-- node --eni1 (secondary ENI)--> vpc router (strict rp_filter = EC2's src/dst check) --> vpchost
                    \-eth0 (primary ENI, the main table's default route)-/
  The pod's IP is a secondary IP of eni1; a pod packet leaving by eth0 is dropped by the router.
  eniwire  (a): datapath.Open + PutENI(eth0, eni1) + PutPod + AttachPodVeth (tcx): from_pod redirect_neigh
                out of eni1, to_pod redirect_peer back. N pods = N entries in the pod map (N-1 point at
                veth ifindexes that do not exist).
  vpc-cni  (b): the AWS VPC CNI's routing: per pod 'to podIP lookup main' (prio 512) and 'from podIP lookup 2'
                (prio 1536); table 2 = gateway + default via eni1; 'fwmark 0x80/0x80 lookup main' (1024);
                'from <eni1 IP> lookup 2' (32765); eni1's subnet route removed from main. N pods = 2N rules,
                inserted with one 'ip -batch'; the measured pod's pair is re-added last (worst case, as the
                newest pod). No iptables SNAT/connmark chains: a lower bound of the VPC CNI's cost.
  plain    (c): the floor, no policy: 'route 10.88.9.0/24 via 10.88.2.1 dev eni1' in main; host-stack
                forwarding, no rule, no BPF. Pod count does not change it.
  Every scheme has the pod's '10.88.2.21/32 dev host0' route and the same pod plumbing (169.254.1.1 gateway).
  TCP: iperf3 -c vpchost -t T -J -P 1 from the pod (received bits/s). UDP: one 64-byte datagram in flight,
  pod -> Go echo server in vpchost, for the RR duration; rate, p50, p99 RTT (client in the benchmark process).
  Sizes grow in one run; at each size every scheme runs k times, the scheme order rotated per repeat.
  Figures are medians of k; ratios are medians of per-repeat ratios against plain (c) in the same repeat.
  from_pod: BPF_PROG_TEST_RUN of the attached program (found through its pinned link) on a TCP header from
  the pod to vpchost (verdict TC_ACT_REDIRECT out of eni1), kernel-timed mean per packet, median of k.
  Service rows ('to service'): the same TCP and UDP runs to ClusterIP 10.100.0.10 (tcp/80, udp/53), which the
  node DNATs to vpchost (5201, 7007) with kube-proxy's nftables-mode rule shape, no masquerade; eniwire
  and plain only, after the direct runs of each repeat, rotated. The rules (and so the node's conntrack)
  exist only during a Service run; ratios against plain's Service run of the same repeat.
  IPv6 rows ('to vpchost6'): eniwire and plain, each on an IPv6 topology of its own (the same namespaces and
  links, IPv6 on): pod 2600:1f14:e0:1:a::21 (the node's /80 on eth0, the primary ENI), default via fe80::1
  (permanent neighbour = host veth's MAC); node eth0 2600:1f14:e0:1::10/64, ::/0 via the router, pod /128 on
  host0; router routes the /80 to the node; vpchost 2600:1f14:e0:9::9. eniwire: as in IPv6 mode, the pod's
  IPv6 address in the pod map on eth0 (N pods = N IPv6 entries); plain: the routed veth, no BPF. iperf3 -6
  and the UDP ping-pong to vpchost6, after the Service runs of each repeat, rotated; ratios against plain's.
  Policy rows: a topology of their own, eniwire installed as the agent runs it (NetworkPolicy on), 1 pod.
  A NetworkPolicy selects the pod (policyTypes Ingress and Egress, no ingress rule; egress to the ipBlock
  10.88.9.0/24 on tcp/5201, tcp/5202, udp/7007): every measured flow is allowed, tcp/5203 is not.
  none: no policy. eniwire: the agent's compiler (netpol) on the Namespace, Pod and NetworkPolicy, its
  output written into the datapath's policy maps (SetPodPolicy). kube-network-policies: SIG Network's
  reference implementation (sigs.k8s.io/kube-network-policies v0.8.0, its networkpolicy controller fed the
  same objects through a client-go fake clientset; nftables + nfqueue), eniwire writing no policy, in the
  router's namespace: eniwire's programs send the pod's packets out of eni1 past the node's netfilter
  hooks, so the router is the first host stack that forwards the flows. Each run starts once the allowed
  port answers and tcp/5203 does not, and ends with the policy lifted and the pod's conntrack entries gone.
  TCP stream: iperf3 as above. TCP CRR: netperf's TCP_CRR shape, one transaction at a time, each a new
  connection (connect, 64-byte request, 64-byte answer, close) to tcp/5202 for the RR duration.
  Each enforcer runs k times (-policy-repeats, default 7), the order rotated per repeat; ratios are medians
  of per-repeat ratios against none in the same repeat.`

// Sample is one measurement of one scheme at one size.
type Sample struct {
	Scheme string
	Target string // Direct.Name or Service.Name
	Pods   int
	Repeat int
	TCP    TCPResult
	RR     RRResult
}

// Setup is how long growing a scheme to a size took and how many rules the node then held.
type Setup struct {
	Scheme string
	Target string // the target its reachability was checked on: Direct.Name, or Direct6.Name on IPv6
	Pods   int
	Rules  int
	Grow   time.Duration
}

// ProgSample is one BPF_PROG_TEST_RUN of from_pod.
type ProgSample struct {
	Pods      int
	Repeat    int
	PerPacket time.Duration
}

// Row is the summary of one (scheme, size).
type Row struct {
	Scheme   string  `json:"scheme"`
	Target   string  `json:"target"`
	Pods     int     `json:"pods"`
	Rules    int     `json:"ip_rules"`
	GrowMs   float64 `json:"grow_ms"`
	TCPGbps  float64 `json:"tcp_gbps"`
	TCPRatio float64 `json:"tcp_vs_plain"`
	RRRate   float64 `json:"udp_rr_per_s"`
	RRRatio  float64 `json:"udp_rr_vs_plain"`
	P50us    float64 `json:"rtt_p50_us"`
	P50Ratio float64 `json:"rtt_p50_plain_over_this"`
	P99us    float64 `json:"rtt_p99_us"`
	Lost     int     `json:"udp_lost"`
	Retrans  int     `json:"tcp_retransmits"`
	Repeats  int     `json:"repeats"`
}

// Report is a whole run.
type Report struct {
	Options Options
	Samples []Sample
	Setups  []Setup
	Prog    []ProgSample
	Wall    time.Duration

	LoadStart, LoadEnd float64 // 1-minute load average around the run

	PolicySamples []PolicySample

	Rows       []Row
	PolicyRows []PolicyRow
	ProgNs     map[int]float64 // median from_pod ns/packet by size
	Schemes    []string
	baseline   string
}

func (r *Report) summarize() {
	r.baseline = Plain{}.Name()
	r.Schemes = []string{(&Eniwire{}).Name(), (&VPCCNI{}).Name(), r.baseline}
	type key struct {
		target       string
		pods, repeat int
	}
	base := map[key]Sample{} // plain's sample to the same target in the same repeat
	for _, s := range r.Samples {
		if s.Scheme == r.baseline {
			base[key{s.Target, s.Pods, s.Repeat}] = s
		}
	}
	r.Rows = nil
	for _, pods := range r.Options.Sizes {
		for _, rowKey := range r.rowKeys() {
			name, target := rowKey[0], rowKey[1]
			row := Row{Scheme: name, Target: target, Pods: pods}
			for _, st := range r.Setups {
				if st.Scheme == name && st.Pods == pods && (st.Target == target || target == Service.Name && st.Target == Direct.Name) {
					row.Rules, row.GrowMs = st.Rules, float64(st.Grow.Microseconds())/1e3
				}
			}
			var tcp, tcpR, rr, rrR, p50, p50R, p99 []float64
			for _, s := range r.Samples {
				if s.Scheme != name || s.Target != target || s.Pods != pods {
					continue
				}
				b := base[key{s.Target, s.Pods, s.Repeat}]
				tcp, rr = append(tcp, s.TCP.Gbps), append(rr, s.RR.Rate)
				p50, p99 = append(p50, us(s.RR.P50)), append(p99, us(s.RR.P99))
				if b.TCP.Gbps > 0 && b.RR.Rate > 0 {
					tcpR, rrR = append(tcpR, s.TCP.Gbps/b.TCP.Gbps), append(rrR, s.RR.Rate/b.RR.Rate)
					p50R = append(p50R, float64(b.RR.P50)/float64(s.RR.P50))
				}
				row.Lost += s.RR.Lost
				row.Retrans += s.TCP.Retransmits
				row.Repeats++
			}
			row.TCPGbps, row.TCPRatio, row.RRRate, row.RRRatio = median(tcp), median(tcpR), median(rr), median(rrR)
			row.P50us, row.P50Ratio, row.P99us = median(p50), median(p50R), median(p99)
			if row.Repeats > 0 {
				r.Rows = append(r.Rows, row)
			}
		}
	}
	r.ProgNs = map[int]float64{}
	for _, pods := range r.Options.Sizes {
		var ns []float64
		for _, p := range r.Prog {
			if p.Pods == pods {
				ns = append(ns, float64(p.PerPacket.Nanoseconds()))
			}
		}
		r.ProgNs[pods] = median(ns)
	}
}

// rowKeys are the (scheme, target) pairs of the rows at each size: every scheme direct, then those measured
// through the Service, then those measured over IPv6.
func (r *Report) rowKeys() [][2]string {
	var keys [][2]string
	for _, target := range []string{Direct.Name, Service.Name, Direct6.Name} {
		for _, name := range r.Schemes {
			keys = append(keys, [2]string{name, target})
		}
	}
	return keys
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// row finds a summary row.
func (r *Report) row(scheme, target string, pods int) Row {
	for _, row := range r.Rows {
		if row.Scheme == scheme && row.Target == target && row.Pods == pods {
			return row
		}
	}
	return Row{}
}

// Worst is a scheme's lowest ratio against plain over every size, to a target (Direct.Name or
// Service.Name), by metric: "tcp", "rr" (UDP transactions/s) or "p50" (plain's median RTT over the
// scheme's). The requirement is eniwire's ≥ 0.90 direct.
func (r *Report) Worst(scheme, target, metric string) float64 {
	worst := 0.0
	for i, pods := range r.Options.Sizes {
		row := r.row(scheme, target, pods)
		m := map[string]float64{"tcp": row.TCPRatio, "rr": row.RRRatio, "p50": row.P50Ratio}[metric]
		if i == 0 || m < worst {
			worst = m
		}
	}
	return worst
}

// Flatness is a scheme's UDP rate at the largest size over its rate at the smallest.
func (r *Report) Flatness(scheme string) float64 {
	first, last := r.row(scheme, Direct.Name, r.Options.Sizes[0]), r.row(scheme, Direct.Name, r.Options.Sizes[len(r.Options.Sizes)-1])
	if first.RRRate == 0 {
		return 0
	}
	return last.RRRate / first.RRRate
}

// WriteTable prints the method, one line per (size, scheme), from_pod's cost and the verdict on the
// target.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", Method)
	fmt.Fprintf(&b, "k=%d repeats, iperf3 -t %s, UDP RR %s, %d packets per BPF_PROG_TEST_RUN; wall time %s\n\n",
		r.Options.Repeats, r.Options.TCPDuration, r.Options.RRDuration, r.Options.ProgRepeat, r.Wall.Round(time.Second))
	if r.Options.PolicyOnly {
		fmt.Fprintf(&b, "Policy rows only (-policy-only). Load average (1 min) at start %.2f, at end %.2f on %d CPUs.\n",
			r.LoadStart, r.LoadEnd, runtime.NumCPU())
		if err := r.writePolicyTable(&b); err != nil {
			return err
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pods\tscheme\tto\tip rules\tsetup ms\tTCP Gbit/s\tvs plain\tUDP RR/s\tvs plain\tp50 µs\tvs plain\tp99 µs\tlost\tfrom_pod ns/pkt\t")
	for _, row := range r.Rows {
		prog := "-"
		if row.Scheme == (&Eniwire{}).Name() && row.Target == Direct.Name {
			prog = fmt.Sprintf("%.0f", r.ProgNs[row.Pods])
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f\t%.1f\t%.2f\t%.1f\t%d\t%s\t\n",
			row.Pods, row.Scheme, row.Target, row.Rules, row.GrowMs, row.TCPGbps, row.TCPRatio, row.RRRate, row.RRRatio,
			row.P50us, row.P50Ratio, row.P99us, row.Lost, prog)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	first, last := r.Options.Sizes[0], r.Options.Sizes[len(r.Options.Sizes)-1]
	metrics := []struct{ key, label string }{{"tcp", "TCP"}, {"rr", "UDP RR/s"}, {"p50", "p50 RTT"}}
	worst := func(heading, target string, judged bool) {
		b.WriteString(heading)
		for _, m := range metrics {
			verdict, ratio := "", r.Worst("eniwire", target, m.key)
			if judged && ratio < 0.90 {
				verdict = " NOT met"
			} else if judged {
				verdict = " met"
			}
			fmt.Fprintf(&b, " %s %.2f%s;", m.label, ratio, verdict)
		}
	}
	worst("\nTarget eniwire ≥ 0.90 × plain at every size (worst ratio over sizes):", Direct.Name, true)
	worst("\nThrough the Service, eniwire / plain (worst ratio over sizes):", Service.Name, false)
	worst("\nOver IPv6 (to vpchost6), target eniwire ≥ 0.90 × plain at every size (worst ratio over sizes):", Direct6.Name, true)
	fmt.Fprintf(&b, "\nLoad average (1 min) at start %.2f, at end %.2f on %d CPUs: other work on the machine shows as noise.\n",
		r.LoadStart, r.LoadEnd, runtime.NumCPU())
	fmt.Fprintf(&b, "UDP RR at %d pods / at %d pods: eniwire %.2f, vpc-cni %.2f, plain %.2f; from_pod %.0f → %.0f ns/pkt.\n",
		last, first, r.Flatness("eniwire"), r.Flatness("vpc-cni"), r.Flatness("plain"), r.ProgNs[first], r.ProgNs[last])
	if err := r.writePolicyTable(&b); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSONLines prints one JSON object per line: every summary row ("kind":"summary"), every sample
// ("sample"), from_pod's cost per size ("from_pod"), the policy rows ("policy_summary", "policy_sample")
// and the run ("run").
func (r *Report) WriteJSONLines(w io.Writer) error {
	enc := json.NewEncoder(w)
	type kinded struct {
		Kind string `json:"kind"`
		Row
	}
	for _, row := range r.Rows {
		if err := enc.Encode(kinded{"summary", row}); err != nil {
			return err
		}
	}
	for _, s := range r.Samples {
		if err := enc.Encode(map[string]any{
			"kind": "sample", "scheme": s.Scheme, "target": s.Target, "pods": s.Pods, "repeat": s.Repeat,
			"tcp_gbps": s.TCP.Gbps, "tcp_retransmits": s.TCP.Retransmits,
			"udp_rr_per_s": s.RR.Rate, "udp_transactions": s.RR.Transactions, "udp_lost": s.RR.Lost,
			"rtt_p50_us": us(s.RR.P50), "rtt_p99_us": us(s.RR.P99),
		}); err != nil {
			return err
		}
	}
	for _, pods := range r.Options.Sizes {
		if _, ok := r.ProgNs[pods]; !ok {
			continue // a policy-only run measured none
		}
		if err := enc.Encode(map[string]any{"kind": "from_pod", "pods": pods, "ns_per_packet": r.ProgNs[pods]}); err != nil {
			return err
		}
	}
	if err := r.writePolicyJSONLines(w); err != nil {
		return err
	}
	if r.Options.PolicyOnly {
		return enc.Encode(map[string]any{"kind": "run", "wall_s": r.Wall.Seconds(), "policy_repeats": r.Options.PolicyRepeats, "policy_only": true,
			"loadavg_start": r.LoadStart, "loadavg_end": r.LoadEnd})
	}
	return enc.Encode(map[string]any{
		"kind": "run", "wall_s": r.Wall.Seconds(), "repeats": r.Options.Repeats, "policy_repeats": r.Options.PolicyRepeats, "sizes": r.Options.Sizes,
		"eniwire_worst_vs_plain":         r.worstAll(Direct.Name),
		"eniwire_service_worst_vs_plain": r.worstAll(Service.Name),
		"eniwire_ipv6_worst_vs_plain":    r.worstAll(Direct6.Name),
		"loadavg_start":                  r.LoadStart, "loadavg_end": r.LoadEnd,
		"udp_rr_flatness": map[string]float64{"eniwire": r.Flatness("eniwire"), "vpc-cni": r.Flatness("vpc-cni"), "plain": r.Flatness("plain")},
	})
}

// worstAll is Worst of eniwire to a target by every metric.
func (r *Report) worstAll(target string) map[string]float64 {
	return map[string]float64{"tcp": r.Worst("eniwire", target, "tcp"), "rr": r.Worst("eniwire", target, "rr"), "p50": r.Worst("eniwire", target, "p50")}
}

// loadAvg reads the 1-minute load average; 0 when unreadable.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}
