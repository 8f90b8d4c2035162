package dpbench

import (
	"path/filepath"
	"testing"
	"time"
)

// TestEachEnforcerOfThePolicyRowsAllowsTheMeasuredFlowsAndRefusesTheProbe: the policy rows measure what
// they claim. Under each enforcer the pod's TCP stream and connect/request/close flows pass and the port
// the policy leaves out does not (Enforce waits for both); once the policy is lifted, that port answers
// again (Lift waits for it). kube-network-policies' controller is built from its module and run for real.
func TestEachEnforcerOfThePolicyRowsAllowsTheMeasuredFlowsAndRefusesTheProbe(t *testing.T) {
	requireTools(t)
	ctx := t.Context()
	knp := filepath.Join(t.TempDir(), "knp")
	if err := BuildKNP(ctx, "knp", knp); err != nil {
		t.Fatal(err)
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
	if len(pb.enforcers) != 3 {
		t.Fatalf("%d enforcers, want none, eniwire and kube-network-policies", len(pb.enforcers))
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
	if k := pb.enforcers[2].(*KubeNetworkPolicies); k.XTQueue {
		t.Log("this kernel has no nft_queue: kube-network-policies' queue rules were added in xtables form")
	}
}
