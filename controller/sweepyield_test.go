package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// heldGrowth throttles every AssignPrivateIpAddresses and CreateNetworkInterface until release is closed: a
// pool whose refill takes long, as in a rollout that shares the account's buckets.
type heldGrowth struct {
	*describeLog
	release chan struct{}
}

func (h heldGrowth) hold(context.Context) error {
	select {
	case <-h.release:
		return nil
	default:
		return &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
	}
}

func (h heldGrowth) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, o ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	if err := h.hold(ctx); err != nil {
		return nil, err
	}
	return h.describeLog.AssignPrivateIpAddresses(ctx, in, o...)
}

func (h heldGrowth) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, o ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	if err := h.hold(ctx); err != nil {
		return nil, err
	}
	return h.describeLog.CreateNetworkInterface(ctx, in, o...)
}

// TestTheOrphanSweepWaitsWhileTheNodesPodsWaitForIPs: the cluster-wide sweep for orphaned ENIs is housekeeping
// that unblocks no pod; while the node's own pods wait for the IPs its pool is bringing, its describes are left
// to what brings them (in a 300-node rollout the sweeps were a fifth of the describes before the last pod had
// its IP). Once the pods have their IPs the sweep runs again.
func TestTheOrphanSweepWaitsWhileTheNodesPodsWaitForIPs(t *testing.T) {
	w := newWorld(t, "m5.large", 100)
	log := &describeLog{EC2API: w.ec2(nil)}
	api := heldGrowth{describeLog: log, release: make(chan struct{})}
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = 10 * time.Second
	cfg.WarmENITarget, cfg.WarmIPTarget = 0, 1
	r := w.start(cfg, api, nil)
	waitReady(t, r.node)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	added := make(chan error, 1)
	go func() { // kubelet's pod worker: the ADD again after each "no IP"
		for {
			_, err := r.node.Assign(ctx, assignReq("pod-0"))
			if err == nil || ctx.Err() != nil {
				added <- err
				return
			}
		}
	}()
	w.passVirtual(60*time.Second, nil)
	if n := log.count("orphan sweep"); n != 0 {
		t.Errorf("%d orphan sweeps in 60 virtual seconds while the node's pod waited for an IP (sweep interval %s); want none", n, cfg.OrphanSweepInterval)
	}
	close(api.release)
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("the pod's ADD: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pod had no IP 10 s after growth was let through")
	}
	w.passVirtual(30*time.Second, nil)
	if n := log.count("orphan sweep"); n == 0 {
		t.Errorf("no orphan sweep in 30 virtual seconds after the node's pod had its IP (sweep interval %s)", cfg.OrphanSweepInterval)
	}
}
