package dpbench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEachEnforcerOfThePolicyRowsAllowsTheMeasuredFlowsAndRefusesTheProbe: the policy rows measure what
// they claim. Under each enforcer the pod's TCP stream and connect/request/close flows pass and the port
// the policy leaves out does not (Enforce waits for both); once the policy is lifted, that port answers
// again (Lift waits for it). kube-network-policies' controller, a module of its own that takes minutes to
// compile, is run for real when DPBENCH_KNP names its build (`make bench` builds it and sets it); without it
// the test checks the other two enforcers, as `make test` runs it.
func TestEachEnforcerOfThePolicyRowsAllowsTheMeasuredFlowsAndRefusesTheProbe(t *testing.T) {
	requireTools(t)
	ctx := t.Context()
	knp := os.Getenv("DPBENCH_KNP")
	want := 3
	if knp == "" {
		want = 2
		t.Log("DPBENCH_KNP is unset: kube-network-policies' rows are make bench's")
	}
	prefix := UniquePrefix("policy")
	pb, err := newPolicyBench(ctx, prefix, filepath.Join("/sys/fs/bpf", prefix), knp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pb.Close(); err != nil {
			t.Errorf("tearing down: %v", err)
		}
	})
	if len(pb.enforcers) != want {
		t.Fatalf("%d enforcers, want %d: none, eniwire and, with DPBENCH_KNP, kube-network-policies", len(pb.enforcers), want)
	}
	for _, e := range pb.enforcers {
		t.Run(e.Name(), func(t *testing.T) {
			if err := e.Enforce(ctx, pb.topo); err != nil {
				t.Fatal(err)
			}
			crr, err := TCPConnectRequestClose(ctx, pb.topo, crrTarget, 300*time.Millisecond)
			if err != nil || crr.Transactions < 10 || crr.P99 < crr.P50 {
				t.Errorf("connect/request/close under %s: %+v, %v; want at least 10 transactions", e.Name(), crr, err)
			}
			if tcp, err := TCPThroughput(ctx, pb.topo, Direct, time.Second); err != nil || tcp.Gbps <= 0 {
				t.Errorf("iperf3 under %s: %.3f Gbit/s, %v; want traffic", e.Name(), tcp.Gbps, err)
			}
			if err := e.Lift(ctx, pb.topo); err != nil {
				t.Fatal(err)
			}
		})
	}
	if k, ok := pb.enforcers[len(pb.enforcers)-1].(*KubeNetworkPolicies); ok && k.XTQueue {
		t.Log("this kernel has no nft_queue: kube-network-policies' queue rules were added in xtables form")
	}
}
