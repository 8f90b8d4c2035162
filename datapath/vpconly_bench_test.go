package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/internal/progbench"
)

// BenchmarkFromPodVPCOnly: from_pod's cost per packet for a pod of a security-group set in strict mode
// (Pod.VPCOnly) beside a default pod's, among 1,000 pods, taken in turns in the same run: to a pod of the
// node (the default pod's packet goes into the peer, the VPC-only pod's out of its ENI), to the VPC, and
// to the internet (the default pod's goes to the host to be SNATed, the VPC-only pod's out of its ENI).
func BenchmarkFromPodVPCOnly(b *testing.B) {
	const pods = 1000
	d := openBenchNode(b)
	// The two senders sit behind loopback, where the test run arrives; the peer (pod 0) behind a real veth.
	dflt, strict := podAt(pods-1), podAt(pods-2)
	for i := range pods {
		p := Pod{IP: podAt(i), HostIfindex: 100 + i, ENIIfindex: loIfindex}
		if p.IP == dflt || p.IP == strict {
			p.HostIfindex, p.VPCOnly = loIfindex, p.IP == strict
		}
		if err := d.PutPodEntry(p); err != nil {
			b.Fatal(err)
		}
	}
	n := runNS(b, 100)
	for _, c := range []struct {
		name string
		dst  netip.Addr
		want [2]uint32 // default pod, VPC-only pod
	}{
		{"peer", podAt(0), [2]uint32{tcActRedirect, tcActRedirect}},
		{"vpc", addr("10.2.3.4"), [2]uint32{tcActRedirect, tcActRedirect}},
		{"internet", addr("192.0.2.1"), [2]uint32{tcActUnspec, tcActRedirect}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var per [2]time.Duration
			b.ResetTimer()
			// In turns, a slice of b.N each, so that the machine's noise falls on both alike.
			for round := range 4 {
				for k, src := range []netip.Addr{dflt, strict} {
					var ret uint32
					var took time.Duration
					err := n.Do(func(ns.NetNS) (err error) {
						ret, took, err = progbench.Run(d.objs.EniwFromPod, frame(src, c.dst, protoTCP, 40000, 443), max(b.N/4, 1))
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					if ret != c.want[k] {
						b.Fatalf("from_pod returned %d for sender %s, want %d: the benchmark measured another path", ret, src, c.want[k])
					}
					if round == 0 || took < per[k] {
						per[k] = took
					}
				}
			}
			b.ReportMetric(float64(per[0].Nanoseconds()), "default-ns/pkt")
			b.ReportMetric(float64(per[1].Nanoseconds()), "vpc-only-ns/pkt")
			b.ReportMetric(float64(per[1])/float64(per[0]), "vpc-only/default")
		})
	}
	noFromPodDrops(b, d)
}
