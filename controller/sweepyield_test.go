package controller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/test/ec2sim"
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

// podWaitingForAnIP is kubelet's pod worker for pod-0: its ADD again after each "no IP", until one succeeds or the
// test ends; the channel gets the last ADD's error.
func podWaitingForAnIP(t *testing.T, node *controller.Node) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	added := make(chan error, 1)
	go func() {
		for {
			_, err := node.Assign(ctx, assignReq("pod-0"))
			if err == nil || ctx.Err() != nil {
				added <- err
				return
			}
		}
	}()
	return added
}

// waitAdded fails the test unless the pod's ADD succeeds within 10 s (growth was let through).
func waitAdded(t *testing.T, added <-chan error) {
	t.Helper()
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("the pod's ADD: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pod had no IP 10 s after growth was let through")
	}
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

	added := podWaitingForAnIP(t, r.node)
	w.passVirtual(60*time.Second, nil)
	if n := log.count("orphan sweep"); n != 0 {
		t.Errorf("%d orphan sweeps in 60 virtual seconds while the node's pod waited for an IP (sweep interval %s); want none", n, cfg.OrphanSweepInterval)
	}
	close(api.release)
	waitAdded(t, added)
	w.passVirtual(30*time.Second, nil)
	if n := log.count("orphan sweep"); n == 0 {
		t.Errorf("no orphan sweep in 30 virtual seconds after the node's pod had its IP (sweep interval %s)", cfg.OrphanSweepInterval)
	}
}

// TestThePeriodicReconcileWaitsWhileTheNodesPodsWaitForIPs: the periodic reconcile is housekeeping too: while
// the node's own pods wait for the IPs its pool is bringing, it waits (at most MaxReconcileInterval after the
// last one), and runs once they have them. (In a 1,000-node rollout in fragmented subnets, whose pods wait
// minutes for the account's assign bucket, the periodic reconciles were half the describes sent before the last
// pod had its IP.)
func TestThePeriodicReconcileWaitsWhileTheNodesPodsWaitForIPs(t *testing.T) {
	w := newWorld(t, "m5.large", 100)
	log := &describeLog{EC2API: w.ec2(nil)}
	api := heldGrowth{describeLog: log, release: make(chan struct{})}
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = -1
	cfg.WarmENITarget, cfg.WarmIPTarget = 0, 1
	r := w.start(cfg, api, nil)
	waitReady(t, r.node)

	added := podWaitingForAnIP(t, r.node)
	before := log.count("attached")
	w.passVirtual(3*time.Minute, nil)
	if n := log.count("attached") - before; n != 0 {
		t.Errorf("%d periodic reconciles in 3 virtual minutes while the node's pod waited for an IP (ReconcileInterval %s); want none",
			n, cfg.ReconcileInterval)
	}
	close(api.release)
	waitAdded(t, added)
	before = log.count("attached")
	w.passVirtual(30*time.Second, nil)
	if n := log.count("attached") - before; n == 0 {
		t.Errorf("no reconcile in 30 virtual seconds after the node's pod had its IP (ReconcileInterval %s, overdue)", cfg.ReconcileInterval)
	}
}

// TestANewNodesFirstOrphanSweepComesAfterHalfItsInterval: every node of a cluster sweeps for the whole cluster,
// and a node just started has nothing to collect that the others would not: its first sweep comes as every
// later one does, at 0.5 to 1.5 intervals, not at a random part of one (in a 1,000-node rollout in fragmented
// subnets, the sweeps of the new nodes were a third of the describes sent before the last pod had its IP).
// Eight nodes, none of which sweeps in its first half interval: with the first sweep anywhere in the first
// interval, all eight would hold off by chance once in 256 runs.
func TestANewNodesFirstOrphanSweepComesAfterHalfItsInterval(t *testing.T) {
	for i := range 8 {
		w, log, cfg, r := startSweepingNode(t, 100)
		w.passVirtual(cfg.OrphanSweepInterval/2-2*time.Second, nil)
		if n := log.count("orphan sweep"); n != 0 {
			t.Fatalf("node %d swept %d times in its first %s (sweep interval %s); want none", i, n, cfg.OrphanSweepInterval/2, cfg.OrphanSweepInterval)
		}
		w.passVirtual(cfg.OrphanSweepInterval+5*time.Second, nil)
		if n := log.count("orphan sweep"); n == 0 {
			t.Fatalf("node %d never swept in 1.5 intervals (%s)", i, cfg.OrphanSweepInterval)
		}
		r.stop()
	}
}

// TestAnOrphanSweepThatFindsNothingStretchesTheNextAndOneThatCollectsBringsItBack: every node sweeps for the
// whole cluster, so a node whose sweeps find nothing sweeps at 1, 2, 4, then every 6 intervals (in a 1,000-node
// rollout in fragmented subnets, 5-minute sweeps were a third of the describes sent before the last pod had its
// IP); a sweep that collects an orphan brings the node back to its interval. With 1-minute intervals spread over
// 0.5 to 1.5 of them, a node that did not stretch would sweep at least 20 times in 30 minutes; one that stretches
// at most 12 times.
func TestAnOrphanSweepThatFindsNothingStretchesTheNextAndOneThatCollectsBringsItBack(t *testing.T) {
	w, log, cfg, _ := startSweepingNode(t, 200)
	w.passVirtual(30*time.Minute, nil)
	if n := log.count("orphan sweep"); n > 12 || n < 4 {
		t.Fatalf("%d orphan sweeps in 30 virtual minutes of a cluster with no orphan (interval %s); want 4 to 12 (1, 2, 4, then 6 intervals apart)",
			n, cfg.OrphanSweepInterval)
	}

	gone, err := w.sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: w.inst.SubnetID})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.sim.TerminateInstance(gone.ID); err != nil {
		t.Fatal(err)
	}
	orphan := createOrphan(t, w, gone.ID, cfg.Cluster)
	// The stretched interval is 6 minutes, spread up to 9.
	start := w.clk.Now()
	eventually(t, time.Minute, "the orphan of a terminated instance collected", func() error {
		if _, ok := w.sim.ENI(orphan); ok {
			if waited := w.clk.Since(start); waited > 10*time.Minute {
				t.Fatalf("the orphan %s of a terminated instance still there after %s", orphan, waited.Round(time.Second))
			}
			return errors.New("still there")
		}
		return nil
	})
	collectedAt := log.count("orphan sweep")
	w.passVirtual(90*time.Second+5*time.Second, nil)
	if n := log.count("orphan sweep") - collectedAt; n == 0 {
		t.Errorf("no orphan sweep within 1.5 intervals after one that collected an orphan (interval %s)", cfg.OrphanSweepInterval)
	}
}

// startSweepingNode starts a node on a clock factor times the wall's, sweeping for orphans every minute, its
// describes logged, and waits until it is ready.
func startSweepingNode(t *testing.T, factor float64) (*world, *describeLog, controller.Config, *running) {
	t.Helper()
	w := newWorld(t, "m5.large", factor)
	log := &describeLog{EC2API: w.ec2(nil)}
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = time.Minute
	r := w.start(cfg, log, nil)
	waitReady(t, r.node)
	return w, log, cfg, r
}

// createOrphan creates an available ENI with the cluster's tags for owner, created an hour ago: what a node that
// died between its create and its attach leaves.
func createOrphan(t *testing.T, w *world, owner, cluster string) string {
	t.Helper()
	tags := []types.Tag{
		{Key: aws.String(eni.TagOwner), Value: aws.String(owner)},
		{Key: aws.String(eni.TagCreatedAt), Value: aws.String(w.clk.Now().Add(-time.Hour).UTC().Format(time.RFC3339))},
		{Key: aws.String(eni.TagCluster), Value: aws.String(cluster)},
	}
	out, err := w.ec2(nil).CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(w.inst.SubnetID),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: tags}}})
	if err != nil {
		t.Fatalf("creating an orphan of %s: %v", owner, err)
	}
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}
