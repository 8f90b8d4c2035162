package controller_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/metadata"
)

// TestANewInstanceTakesItsFirstViewOfItsENIsFromIMDS: a new instance (no journal) whose IMDS shows its
// primary ENI alone is ready, and grows its pool, without a DescribeNetworkInterfaces: IMDS answers for the
// instance alone, while a rollout's nodes all share the account's describe bucket (100, then 20 a second) in
// the same seconds. Its first reconcile with EC2 comes later, as housekeeping, and finds the books right. When
// IMDS shows any other ENI (one attached by someone else, or by a run whose journal is lost), the first view
// is EC2's, as before: IMDS holds no tags to tell whose an ENI is.
func TestANewInstanceTakesItsFirstViewOfItsENIsFromIMDS(t *testing.T) {
	for _, c := range []struct {
		name          string
		foreign       bool
		wantDescribes bool
	}{
		{name: "the primary ENI alone: no describe before the node is ready"},
		{name: "a foreign ENI attached too: EC2 is read first", foreign: true, wantDescribes: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "m5.large", 100)
			ctx := context.Background()
			var foreign string
			if c.foreign {
				outsider := w.ec2(nil)
				out, err := outsider.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(w.inst.SubnetID)})
				if err != nil {
					t.Fatal(err)
				}
				foreign = aws.ToString(out.NetworkInterface.NetworkInterfaceId)
				if _, err := outsider.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(foreign),
					InstanceId: aws.String(w.inst.ID), DeviceIndex: aws.Int32(1)}); err != nil {
					t.Fatal(err)
				}
			}
			imdsURL, err := w.sw.Server.OpenIMDS(w.inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			md := imds.New(imds.Options{Endpoint: imdsURL, HTTPClient: &http.Client{Timeout: 5 * time.Second}})
			cfg := fastConfig(w.dir)
			cfg.OrphanSweepInterval = -1
			before := w.sim.Counters()["DescribeNetworkInterfaces"].Calls
			r := w.startWith(cfg, controller.Deps{IMDS: metadata.IMDS{API: md}})
			waitReady(t, r.node)
			atReady := w.sim.Counters()["DescribeNetworkInterfaces"].Calls - before
			switch {
			case c.wantDescribes && atReady == 0:
				t.Errorf("ready without a describe although IMDS shows a foreign ENI %s", foreign)
			case !c.wantDescribes && atReady != 0:
				t.Errorf("%d DescribeNetworkInterfaces before the node was ready, want 0 (IMDS shows the primary ENI alone)", atReady)
			}
			st := r.node.Snapshot()
			if len(st.ENIs) == 0 || !st.ENIs[0].Primary || st.ENIs[0].ID != w.inst.PrimaryENI {
				t.Fatalf("the books' ENIs at ready: %+v, want the primary ENI %s first", st.ENIs, w.inst.PrimaryENI)
			}
			assignRetrying(t, r.node, "pod-0")
			// The first reconcile with EC2 follows within three ReconcileIntervals and leaves the books as EC2
			// shows them.
			w.passVirtual(3*cfg.ReconcileInterval+5*time.Second, nil)
			if n := w.sim.Counters()["DescribeNetworkInterfaces"].Calls - before; n == 0 {
				t.Errorf("no DescribeNetworkInterfaces %s after the start: the reconcile with EC2 never ran", 3*cfg.ReconcileInterval)
			}
			eventually(t, 20*time.Second, "books agree with EC2", func() error {
				return w.checkBooks(r.node.Snapshot(), nil)
			})
			if c.foreign {
				for _, e := range r.node.Snapshot().ENIs {
					if e.ID == foreign {
						t.Errorf("the foreign ENI %s is in the books: %+v", foreign, e)
					}
				}
			}
		})
	}
}

// TestAfterAFirstViewFromIMDSAQuietNodeReconcilesAtOneToThreeThenAtFourIntervals: the first view from IMDS counts
// as a reconcile that found the books right, in its pacing too: the first reconcile with EC2 comes at one to
// three ReconcileIntervals, and when it finds the books right as well the next comes at four (±10%), not two.
// (In a 1,000-node rollout in fragmented subnets, the periodic reconciles were the most of the describes sent
// before the last pod had its IP.)
func TestAfterAFirstViewFromIMDSAQuietNodeReconcilesAtOneToThreeThenAtFourIntervals(t *testing.T) {
	w := newWorld(t, "m5.large", 100)
	imdsURL, err := w.sw.Server.OpenIMDS(w.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	md := imds.New(imds.Options{Endpoint: imdsURL, HTTPClient: &http.Client{Timeout: 5 * time.Second}})
	log := &describeLog{EC2API: w.ec2(nil)}
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = -1
	every := cfg.ReconcileInterval
	r := w.startWith(cfg, controller.Deps{EC2: log, IMDS: metadata.IMDS{API: md}})
	waitReady(t, r.node)
	w.passVirtual(3*every+every/10, nil)
	if n := log.count("attached"); n != 1 {
		t.Fatalf("%d reconciles with EC2 in the first %s after a first view from IMDS (ReconcileInterval %s); want 1", n, 3*every, every)
	}
	// The next is at least 1 + 4×0.9 intervals after the start, at most 3 + 4×1.1.
	w.passVirtual(every*13/10, nil)
	if n := log.count("attached"); n != 1 {
		t.Errorf("%d reconciles with EC2 by %s after the start; want 1 (the next comes four intervals after the first)", n, every*44/10)
	}
	w.passVirtual(every*36/10, nil)
	if n := log.count("attached"); n != 2 {
		t.Errorf("%d reconciles with EC2 by %s after the start; want 2", n, every*80/10)
	}
}
