package datapath

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/internal/progbench"
)

// BenchmarkFromPod measures from_pod's per-packet cost (BPF_PROG_TEST_RUN, timed by the kernel) with more
// and more pods in the map. Every lookup is a hash or LPM lookup, so ns/pkt should stay flat.
func BenchmarkFromPod(b *testing.B) {
	for _, pods := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			d := openBenchNode(b)
			// The sender (the last pod) sits behind the device the test run arrives on, loopback, so that
			// from_pod's anti-spoofing check lets its packets through.
			veth := func(i int) int {
				if i == pods-1 {
					return loIfindex
				}
				return 100 + i
			}
			for i := range pods {
				if err := d.PutPod(podAt(i), veth(i), loIfindex); err != nil {
					b.Fatal(err)
				}
			}
			cases := []struct {
				name string
				pkt  []byte
				want uint32
			}{
				{"vpc", frame(podAt(pods-1), addr("10.2.3.4"), protoTCP, 40000, 443), tcActRedirect},
				{"peer", frame(podAt(pods-1), podAt(0), protoTCP, 40000, 443), tcActRedirect},
				{"internet", frame(podAt(pods-1), addr("192.0.2.1"), protoTCP, 40000, 443), tcActUnspec},
			}
			// The programs check that a redirect's target exists: pod 0's veth is a real one, in a
			// namespace of the benchmark's own.
			var peers []int
			if pods > 1 {
				peers = append(peers, veth(0))
			}
			n := runNS(b, peers...)
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					var (
						ret    uint32
						perPkt time.Duration
					)
					b.ResetTimer()
					err := n.Do(func(ns.NetNS) (err error) {
						ret, perPkt, err = progbench.Run(d.objs.EniwFromPod, c.pkt, b.N)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					if ret != c.want {
						b.Fatalf("from_pod returned %d, want %d: the benchmark measured another path", ret, c.want)
					}
					b.ReportMetric(float64(perPkt.Nanoseconds()), "ns/pkt")
				})
			}
			noFromPodDrops(b, d)
		})
	}
}

// openBenchNode opens the datapath of a node of VPC 10.0.0.0/8 with SNAT on, whose ENI (for from_pod's
// benchmarks) is loopback: the entry alone, no attachment, as BPF_PROG_TEST_RUN sends the packet nowhere.
func openBenchNode(b *testing.B) *Datapath {
	d := openTest(b, Config{VPCCIDRs: []netip.Prefix{prefix("10.0.0.0/8")}, NodeIPs: []netip.Addr{addr("10.0.0.10")}, SNAT: true})
	gw, _ := addrKey(addr("10.0.0.1"))
	if err := d.objs.Enis.Put(uint32(loIfindex), bpf.EniwireEniValue{Gateway: gw, Family: 2}); err != nil {
		b.Fatal(err)
	}
	return d
}

// podAt is the address of the benchmarks' ith pod, in 10.1.0.0/16.
func podAt(i int) netip.Addr {
	a := netip.MustParseAddr("10.1.0.0").As4()
	a[2], a[3] = byte(i>>8), byte(i)
	return netip.AddrFrom4(a)
}

// noFromPodDrops fails the benchmark if from_pod dropped a packet: a benchmark of the drop path would
// flatter the figures.
func noFromPodDrops(b *testing.B, d *Datapath) {
	for _, v := range []Verdict{VerdictFromPodSpoof, VerdictRedirectFailed} {
		if c, err := d.Counter(v); err != nil || c.Packets != 0 {
			b.Fatalf("%s = %d packets (err %v), want 0: the benchmark measured drops", v, c.Packets, err)
		}
	}
}
