package dpbench

import (
	"testing"
	"time"

	"github.com/eniwire/eniwire/datapath"
)

// TestEachSchemeCarriesIPv6PodTrafficOutOfThePrimaryENI: on the IPv6 topology, the pod reaches the VPC
// host over IPv6 (UDP echo and an iperf3 -6 stream) through eniwire and through plain routing, every
// request leaving by the primary ENI, the one the pod's /80 belongs to; with eniwire, by from_pod's
// redirect out of the ENI (its out_eni counter), with 100 pods in the map.
func TestEachSchemeCarriesIPv6PodTrafficOutOfThePrimaryENI(t *testing.T) {
	t.Parallel()
	requireTools(t)
	for _, s := range []Scheme{&Eniwire{}, Plain{}} {
		t.Run(s.Name(), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			topo := newTestTopology(t, NewIPv6Topology, "test6")
			installForTest(t, topo, s)
			e, isEniwire := s.(*Eniwire)
			if err := s.Grow(ctx, topo, 100); err != nil {
				t.Fatal(err)
			}
			if err := Reach(ctx, topo, Direct6, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			outENI := func() uint64 {
				if !isEniwire {
					return 0
				}
				r, err := datapath.OpenPinnedReadOnly(e.PinRoot)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				c, err := r.Counter(datapath.VerdictFromPodOutENI)
				if err != nil {
					t.Fatal(err)
				}
				return c.Packets
			}
			redirectedBefore := outENI()
			rr := checkRoundTripsLeaveBy(ctx, t, topo, Direct6, PrimaryENI, SecondaryENI)
			if isEniwire {
				if got := outENI() - redirectedBefore; got < uint64(rr.Transactions) {
					t.Errorf("from_pod redirected %d packets out of the ENI during %d round trips, want every request", got, rr.Transactions)
				}
			}
			tcp, err := TCPThroughput(ctx, topo, Direct6, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if tcp.Gbps <= 0 {
				t.Errorf("iperf3 -6 reported %.3f Gbit/s, want traffic", tcp.Gbps)
			}
			t.Logf("%s over IPv6, 100 pods: %.2f Gbit/s, %.0f UDP transactions/s, p50 %s", s.Name(), tcp.Gbps, rr.Rate, rr.P50)
		})
	}
}
