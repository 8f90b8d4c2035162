package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// maxCapacityPolicies bounds a capacity run: the policies tried before it stops counting, a node's pods
// rarely having more distinct policies than this.
const maxCapacityPolicies = 1000

// BenchmarkPolicyCapacity measures how many distinct policies a node's policy maps hold (with their
// default sizes: bpf/maps.h) when each allows a peer set of peers pods (a /32 each, as a namespace
// selector's pods are compiled) on a TCP port of its own: one pod per policy, each policy set until one
// does not fit (a *PolicyTooLargeError) or maxCapacityPolicies are held. shared: every policy allows the
// same pods (the workloads of one namespace open to the same clients), so they share one peer set and
// differ in their port sets only. distinct: each policy's pods differ by one from the previous policy's,
// so nothing is shared and every policy is a copy of peers entries, which is what every policy cost before
// peer sets. Reported: policies held, peer entries written, and pods×peers the node holds as
// policies×peers.
func BenchmarkPolicyCapacity(b *testing.B) {
	for _, peers := range []int{5000} {
		for _, mode := range []string{"shared", "distinct"} {
			b.Run(fmt.Sprintf("peers=%d/%s", peers, mode), func(b *testing.B) {
				d := openTest(b, Config{VPCCIDRs: []netip.Prefix{prefix("10.0.0.0/8")}})
				var held, entries int
				for range b.N {
					held = 0
					for i := range maxCapacityPolicies {
						offset := 0
						if mode == "distinct" {
							offset = i
						}
						err := d.SetPodPolicy(b.Context(), capacityPod(i), ingressFromPods(peers, offset, uint16(1000+i)))
						var tooLarge *PolicyTooLargeError
						if errors.As(err, &tooLarge) {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						held++
					}
					b.StopTimer()
					entries, _ = policyEntryCount(b, d)
					for i := range held + 1 {
						if err := d.ClearPodPolicy(b.Context(), capacityPod(i)); err != nil {
							b.Fatal(err)
						}
					}
					if left, _ := policyEntryCount(b, d); left != 0 {
						b.Fatalf("%d peer entries left after clearing every pod", left)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(held), "policies")
				b.ReportMetric(float64(entries), "peer_entries")
				b.ReportMetric(float64(held*peers), "policies×peers")
				if held < maxCapacityPolicies {
					b.Logf("policy %d of %d peers did not fit: %d held", held+1, peers, held)
				}
			})
		}
	}
}

// capacityPod is the address of the i-th pod of a capacity run (no pods entry: SetPodPolicy keeps its flags
// for PutPod).
func capacityPod(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}) }

// ingressFromPods is an ingress policy allowing n pods, the /32s from 10.100.0.0 + offset, on one TCP port.
func ingressFromPods(n, offset int, port uint16) dptypes.PodPolicy {
	p := dptypes.PodPolicy{IngressIsolated: true}
	for i := range n {
		a := 10<<24 | 100<<16 + uint32(offset+i)
		p.Ingress = append(p.Ingress, dptypes.PeerPorts{
			Peer:  netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), 32),
			Ports: []dptypes.PortRange{tcp(port, port)},
		})
	}
	return p
}
