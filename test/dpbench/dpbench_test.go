package dpbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
)

func requireTools(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "ip")
	testenv.RequireTool(t, "iperf3")
	testenv.RequireTool(t, "nft")
	if _, err := os.Stat("/sys/fs/bpf"); err != nil {
		testenv.Unavailable(t, "bpffs is not mounted at /sys/fs/bpf")
	}
}

// newTestTopology builds a topology (build is NewTopology or NewIPv6Topology) removed at the test's end.
func newTestTopology(t *testing.T, build func(context.Context, string) (*Topology, error), tag string) *Topology {
	t.Helper()
	topo, err := build(t.Context(), UniquePrefix(tag))
	if err != nil {
		t.Fatalf("building the topology: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("removing the topology: %v", err)
		}
	})
	return topo
}

func TestWithoutASchemeThePodsPacketsLeaveByThePrimaryENIAndTheVPCDropsThem(t *testing.T) {
	t.Parallel()
	requireTools(t)
	topo := newTestTopology(t, NewTopology, "none")
	srv, err := StartServers(t.Context(), topo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	before, err := topo.TxPackets(PrimaryENI)
	if err != nil {
		t.Fatal(err)
	}
	if err := Reach(t.Context(), topo, Direct, 600*time.Millisecond); err == nil {
		t.Fatal("the pod got an echo with no scheme installed: source-based routing would not be what the benchmark measures")
	}
	after, err := topo.TxPackets(PrimaryENI)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 2 {
		t.Errorf("%s sent %d packets, want the pod's requests there", PrimaryENI, after-before)
	}
}

func TestEverySchemeCarriesPodTrafficOutOfTheSecondaryENI(t *testing.T) {
	t.Parallel()
	requireTools(t)
	schemes := []struct {
		scheme Scheme
		// rules is how many IPv4 rules the node should hold with n pods.
		rules func(n int) int
	}{
		{&Eniwire{}, func(int) int { return 3 }},
		{&VPCCNI{}, func(n int) int { return 3 + 2 + 2*n }},
		{Plain{}, func(int) int { return 3 }},
	}
	for _, s := range schemes {
		t.Run(s.scheme.Name(), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			topo := newTestTopology(t, NewTopology, "test")
			installForTest(t, topo, s.scheme)
			for _, pods := range []int{1, 100} {
				t.Run(fmt.Sprintf("with %d pods in the policy", pods), func(t *testing.T) {
					checkSchemeAt(ctx, t, topo, s.scheme, pods, s.rules(pods))
				})
			}
		})
	}
}

// installForTest starts topo's servers and installs s on it (eniwire pinned under a bpffs directory named
// after the node), all removed at the test's end.
func installForTest(t *testing.T, topo *Topology, s Scheme) {
	t.Helper()
	if e, ok := s.(*Eniwire); ok {
		base := filepath.Join("/sys/fs/bpf", topo.Node)
		e.PinRoot = filepath.Join(base, "v1")
		t.Cleanup(func() { _ = os.RemoveAll(base) })
	}
	srv, err := StartServers(t.Context(), topo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if err := s.Install(t.Context(), topo); err != nil {
		t.Fatalf("installing %s: %v", s.Name(), err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing %s: %v", s.Name(), err)
		}
	})
}

func checkSchemeAt(ctx context.Context, t *testing.T, topo *Topology, s Scheme, pods, wantRules int) {
	if err := s.Grow(ctx, topo, pods); err != nil {
		t.Fatalf("growing to %d pods: %v", pods, err)
	}
	if got, err := topo.RuleCount(); err != nil || got != wantRules {
		t.Errorf("the node holds %d IPv4 rules (err %v), want %d", got, err, wantRules)
	}
	if err := Reach(ctx, topo, Direct, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rr := checkRoundTripsLeaveBy(ctx, t, topo, Direct, SecondaryENI, PrimaryENI)
	tcp, err := TCPThroughput(ctx, topo, Direct, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if tcp.Gbps <= 0 {
		t.Errorf("iperf3 reported %.3f Gbit/s, want traffic", tcp.Gbps)
	}
	checkService(ctx, t, topo)
	if e, ok := s.(*Eniwire); ok {
		if per, err := e.FromPodCost(1000); err != nil || per <= 0 {
			t.Errorf("from_pod cost = %s, %v; want a positive time and a redirect out of the ENI", per, err)
		}
	}
	t.Logf("%s, %d pods: %.2f Gbit/s, %.0f UDP transactions/s, p50 %s", s.Name(), pods, tcp.Gbps, rr.Rate, rr.P50)
}

// checkRoundTripsLeaveBy runs UDP round trips from the pod to to and checks that every request left the
// node by the interface via and (almost) none by other.
func checkRoundTripsLeaveBy(ctx context.Context, t *testing.T, topo *Topology, to Target, via, other string) RRResult {
	t.Helper()
	viaBefore, err1 := topo.TxPackets(via)
	otherBefore, err2 := topo.TxPackets(other)
	rr, err3 := UDPRoundTrips(ctx, topo, to, 300*time.Millisecond)
	viaAfter, err4 := topo.TxPackets(via)
	otherAfter, err5 := topo.TxPackets(other)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if rr.Transactions < 10 || rr.P50 <= 0 || rr.P99 < rr.P50 {
		t.Errorf("UDP round trips to %s = %+v, want at least 10 with sane percentiles", to.Name, rr)
	}
	if sent := viaAfter - viaBefore; sent < uint64(rr.Transactions) {
		t.Errorf("%s sent %d packets during %d round trips, want every request there", via, sent, rr.Transactions)
	}
	if sent := otherAfter - otherBefore; sent > uint64(rr.Transactions/10) {
		t.Errorf("%s sent %d packets during %d round trips, want (almost) none", other, sent, rr.Transactions)
	}
	return rr
}

// checkService reaches the VPC host through the Service the service rows measure, then checks that removing
// it leaves the direct path as it was.
func checkService(ctx context.Context, t *testing.T, topo *Topology) {
	t.Helper()
	if err := AddService(ctx, topo); err != nil {
		t.Fatal(err)
	}
	if err := Reach(ctx, topo, Service, 5*time.Second); err != nil {
		t.Fatalf("through the Service: %v", err)
	}
	rr, err := UDPRoundTrips(ctx, topo, Service, 300*time.Millisecond)
	if err != nil {
		t.Fatalf("through the Service: %v", err)
	}
	if rr.Transactions < 10 {
		t.Errorf("UDP round trips through the Service = %+v, want at least 10", rr)
	}
	if tcp, err := TCPThroughput(ctx, topo, Service, time.Second); err != nil || tcp.Gbps <= 0 {
		t.Errorf("iperf3 through the Service: %.3f Gbit/s, %v; want traffic", tcp.Gbps, err)
	}
	if err := RemoveService(ctx, topo); err != nil {
		t.Fatal(err)
	}
	if err := Reach(ctx, topo, Direct, 5*time.Second); err != nil {
		t.Fatalf("after removing the Service: %v", err)
	}
}
