package datapath

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/internal/progbench"
)

// BenchmarkPolicyBothWays measures from_pod's per-packet cost (BPF_PROG_TEST_RUN, timed by the kernel) for
// an established TCP flow between two pods of the node whose packets go both ways at once, each way on a
// CPU of its own, as a stream's segments and its ACKs do: both ways find the same conntrack entry, so what
// one CPU writes into it (the reference count the lookup takes and drops, its timeout when renewed) the other
// CPU's next lookup must fetch. The receiver is selected by no policy (rules=0: the lookup finds no entry)
// or isolated by an ingress policy of 100 rules allowing the sender; ratio_to_0_rules compares each way's
// mean with the same way without policy, measured in the same run. Needs 2 CPUs.
func BenchmarkPolicyBothWays(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Fatalf("%d CPU: the benchmark runs the two ways of the flow on two CPUs", runtime.NumCPU())
	}
	baseline := map[string]float64{}
	for _, rules := range []int{0, 100} {
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			d := openTest(b, Config{VPCCIDRs: []netip.Prefix{prefix("10.0.0.0/8")}, NodeIPs: []netip.Addr{addr("10.0.0.10")}, SNAT: true})
			sender, receiver := addr("10.1.0.1"), addr("10.1.0.2")
			// Both pods sit behind loopback, which a test run arrives on, so that the anti-spoofing check
			// lets either's packets through; the redirect target (loopback) exists.
			for _, p := range []netip.Addr{sender, receiver} {
				if err := d.PutPod(p, loIfindex, loIfindex); err != nil {
					b.Fatal(err)
				}
			}
			if rules > 0 {
				if err := d.SetPodPolicy(b.Context(), receiver, policyOfRules(rules, sender)); err != nil {
					b.Fatal(err)
				}
			}
			n := runNS(b)
			if _, err := runOn(n, d.objs.EniwFromPod, 0, tcpWithFlags(sender, receiver, 40000, 80, tcpSYN)); err != nil { // opens the flow
				b.Fatal(err)
			}
			ways := []struct {
				name string
				pkt  []byte
			}{
				{"segments", tcpWithFlags(sender, receiver, 40000, 80, tcpACK)},
				{"acks", tcpWithFlags(receiver, sender, 80, 40000, tcpACK)},
			}
			perPkt := make([]time.Duration, len(ways))
			errs := make([]error, len(ways))
			var wg sync.WaitGroup
			b.ResetTimer()
			for i, w := range ways {
				wg.Go(func() {
					// n.Do runs on a thread of its own, locked while in the namespace: pinned there, and
					// given its CPUs back before the thread returns to the runtime.
					errs[i] = n.Do(func(ns.NetNS) error {
						var all, cpu unix.CPUSet
						if err := unix.SchedGetaffinity(0, &all); err != nil {
							return err
						}
						cpu.Set(i)
						if err := unix.SchedSetaffinity(0, &cpu); err != nil {
							return fmt.Errorf("pinning the %s to CPU %d: %w", w.name, i, err)
						}
						defer unix.SchedSetaffinity(0, &all)
						ret, per, err := progbench.Run(d.objs.EniwFromPod, w.pkt, b.N)
						if err == nil && ret != tcActRedirect {
							err = fmt.Errorf("from_pod returned %d for the %s, want a redirect: the benchmark measured another path", ret, w.name)
						}
						perPkt[i] = per
						return err
					})
				})
			}
			wg.Wait()
			b.StopTimer()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			for i, w := range ways {
				ns := float64(perPkt[i].Nanoseconds())
				b.ReportMetric(ns, w.name+"-ns/pkt")
				if rules == 0 {
					baseline[w.name] = ns
				} else if base := baseline[w.name]; base > 0 {
					b.ReportMetric(ns/base, w.name+"-ratio_to_0_rules")
				}
			}
		})
	}
}
