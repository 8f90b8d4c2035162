package datapath

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/progbench"
)

// maxNewFlows is how many new flows one namespace takes in a new-flow run: each leaves a conntrack entry,
// and a namespace's table holds nf_conntrack_max (262,144 by default).
const maxNewFlows = 100000

// BenchmarkPolicy measures from_pod's per-packet cost (BPF_PROG_TEST_RUN, timed by the kernel) for pod1's
// TCP packet to pod2 on the same node, with pod2 selected by no policy (rules=0) or isolated by an ingress
// policy of 100 or 10,000 rules, each a CIDR of its own with ports of its own, one of which allows pod1.
// Established: the same packet again and again, its flow known to conntrack. New: each packet a new flow
// (ports of its own), judged and inserted into conntrack. Every lookup is a hash, LPM or conntrack lookup,
// so ns/pkt should stay flat in the number of rules: ratio_to_0_rules compares each row with the row
// without policy, measured in the same run.
func BenchmarkPolicy(b *testing.B) {
	baseline := map[string]float64{}
	for _, rules := range []int{0, 100, 10000} {
		for _, flow := range []string{"established", "new"} {
			b.Run(fmt.Sprintf("rules=%d/%s", rules, flow), func(b *testing.B) {
				d := openTest(b, Config{VPCCIDRs: []netip.Prefix{prefix("10.0.0.0/8")}, NodeIPs: []netip.Addr{addr("10.0.0.10")}, SNAT: true})
				sender, receiver := addr("10.1.0.1"), addr("10.1.0.2")
				// The sender sits behind loopback, which the test run arrives on; the receiver behind a veth
				// of the benchmark's own namespace, which the redirect checks.
				const receiverVeth = 100
				for _, p := range []struct {
					ip   netip.Addr
					veth int
				}{{sender, loIfindex}, {receiver, receiverVeth}} {
					if err := d.PutPod(p.ip, p.veth, loIfindex); err != nil {
						b.Fatal(err)
					}
				}
				if rules > 0 {
					if err := d.SetPodPolicy(b.Context(), receiver, policyOfRules(rules, sender)); err != nil {
						b.Fatal(err)
					}
				}
				n := runNS(b, receiverVeth)
				allowedBefore := counterNow(b, d.Reader, VerdictFromPodIngressAllowed)
				var perPkt time.Duration
				if flow == "established" {
					pkt := frame(sender, receiver, protoTCP, 40000, 80)
					if _, err := runOn(n, d.objs.EniwFromPod, 0, pkt); err != nil { // opens the flow
						b.Fatal(err)
					}
					allowedBefore = counterNow(b, d.Reader, VerdictFromPodIngressAllowed)
					b.ResetTimer()
					var ret uint32
					err := n.Do(func(ns.NetNS) (err error) {
						ret, perPkt, err = progbench.Run(d.objs.EniwFromPod, pkt, b.N)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					if ret != tcActRedirect {
						b.Fatalf("from_pod returned %d, want a redirect: the benchmark measured another path", ret)
					}
				} else {
					// Each packet leaves a conntrack entry: a fresh namespace takes every maxNewFlows of them.
					// The policy's writing is no part of the run: counted, 10,000 rules made the first run
					// last a second, and the framework stopped at one packet, measured cold.
					b.ResetTimer()
					var total time.Duration
					for done := 0; done < b.N; {
						chunk := min(maxNewFlows, b.N-done)
						b.StopTimer()
						fresh, err := newRunNS(receiverVeth)
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						err = fresh.Do(func(ns.NetNS) error {
							for i := done; i < done+chunk; i++ {
								pkt := frame(sender, receiver, protoTCP, uint16(1024+i%60000), uint16(1+i/60000))
								ret, dur, err := d.objs.EniwFromPod.Benchmark(pkt, 1, nil)
								if err != nil {
									return err
								}
								if ret != tcActRedirect {
									return fmt.Errorf("from_pod returned %d, want a redirect: the benchmark measured another path", ret)
								}
								total += dur
							}
							return nil
						})
						closeRunNS(fresh)
						if err != nil {
							b.Fatal(err)
						}
						done += chunk
					}
					perPkt = total / time.Duration(b.N)
				}
				b.StopTimer()
				// New flows must each have been judged and allowed; established ones never.
				opened := counterNow(b, d.Reader, VerdictFromPodIngressAllowed) - allowedBefore
				if want := map[bool]uint64{true: uint64(b.N), false: 0}[flow == "new" && rules > 0]; opened != want {
					b.Fatalf("%d flows opened under the policy, want %d: the benchmark measured another path", opened, want)
				}
				nsPerPkt := float64(perPkt.Nanoseconds())
				b.ReportMetric(nsPerPkt, "ns/pkt")
				if rules == 0 {
					baseline[flow] = nsPerPkt
				} else if base := baseline[flow]; base > 0 {
					b.ReportMetric(nsPerPkt/base, "ratio_to_0_rules")
				}
			})
		}
	}
}

// policyOfRules is an ingress policy of n rules: n-1 CIDRs that do not hold the sender, each with a port
// range of its own, and the sender's /32 with every TCP port.
func policyOfRules(n int, sender netip.Addr) dptypes.PodPolicy {
	p := dptypes.PodPolicy{IngressIsolated: true}
	for i := range n - 1 {
		// Rule i owns the /24 at 172.16.0.0 + i*256 and takes a prefix of 24 to 32 bits in it: every
		// prefix distinct, as the compiler hands them over.
		block := 172<<24 | 16<<16 + uint32(i)<<8
		peer := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(block >> 24), byte(block >> 16), byte(block >> 8), 0}), 24+i%9)
		first := uint16(1000 + i%30000)
		p.Ingress = append(p.Ingress, dptypes.PeerPorts{Peer: peer.Masked(), Ports: []dptypes.PortRange{tcp(first, first+uint16(i%37)), udp(53, 53)}})
	}
	p.Ingress = append(p.Ingress, dptypes.PeerPorts{Peer: netip.PrefixFrom(sender, 32), Ports: []dptypes.PortRange{tcp(0, 65535)}})
	return p
}

// BenchmarkSetPodPolicy measures a policy change as the agent makes it: SetPodPolicy replacing a pod's
// policy of n rules with another of n rules (the new entries written, the pod's flags flipped, the old
// entries deleted), so the time from a compiled change to its enforcement on this node (ns/op). Each rule
// is a peer entry and about three port entries, each written and later deleted by a syscall of its own.
func BenchmarkSetPodPolicy(b *testing.B) {
	for _, rules := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			d := openTest(b, Config{VPCCIDRs: []netip.Prefix{prefix("10.0.0.0/8")}})
			pod, sender := addr("10.1.0.2"), addr("10.1.0.1")
			if err := d.PutPod(pod, 100, loIfindex); err != nil {
				b.Fatal(err)
			}
			// Two policies that differ in one peer and its ports, so that neither shares the other's entries
			// (a peer set included: peersets.go).
			policies := [2]dptypes.PodPolicy{policyOfRules(rules, sender), policyOfRules(rules, sender)}
			last := &policies[1].Ingress[len(policies[1].Ingress)-1]
			last.Peer, last.Ports = netip.PrefixFrom(sender, 31).Masked(), []dptypes.PortRange{tcp(0, 1023)}
			b.ResetTimer()
			for i := range b.N {
				if err := d.SetPodPolicy(b.Context(), pod, policies[i%2]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if peers, _ := policyEntryCount(b, d); peers != rules {
				b.Fatalf("%d peer entries after %d changes, want %d: old entries leaked", peers, b.N, rules)
			}
		})
	}
}
