package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// netdevs is a datapath that keeps what the kernel and the maps would: an ENI brought up gets an interface
// index, a new one each time it comes up again (a re-attached ENI is a new netdev), and a pod's entry points
// at the index its ENI had when PodUp wrote it. PodUp fails while failPods is set.
type netdevs struct {
	dptypes.NoDriver

	mu       sync.Mutex
	next     int
	ifindex  map[string]int // ENI id -> index of its interface while up
	pods     map[string]int // pod IP -> the ENI index its entry points at
	failPods bool
}

func newNetdevs() *netdevs { return &netdevs{ifindex: map[string]int{}, pods: map[string]int{}} }

func (d *netdevs) ENIUp(_ context.Context, e dptypes.ENI) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.ifindex[e.ID]; !ok {
		d.next++
		d.ifindex[e.ID] = d.next
	}
	return nil
}

func (d *netdevs) ENIDown(_ context.Context, e dptypes.ENI) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.ifindex, e.ID)
	return nil
}

func (d *netdevs) PodUp(_ context.Context, p dptypes.Pod) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failPods {
		return errors.New("writing the pod's entry: map busy")
	}
	idx, ok := d.ifindex[p.ENI.ID]
	if !ok {
		return fmt.Errorf("setting up pod %s: ENI %s has no interface", p.IP, p.ENI.ID)
	}
	d.pods[p.IP.String()] = idx
	return nil
}

func (d *netdevs) PodDown(_ context.Context, p dptypes.Pod) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods, p.IP.String())
	return nil
}

func (d *netdevs) setFailing(f bool) {
	d.mu.Lock()
	d.failPods = f
	d.mu.Unlock()
}

// stale returns the assignments whose pod entry is missing or points at another index than their ENI's
// interface has now.
func (d *netdevs) stale(node *controller.Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, a := range node.Assignments() {
		got, ok := d.pods[a.IP]
		switch want, up := d.ifindex[a.ENI]; {
		case !ok:
			errs = append(errs, fmt.Errorf("pod %s (%s) has no datapath entry", a.ContainerID, a.IP))
		case !up || got != want:
			errs = append(errs, fmt.Errorf("pod %s (%s) points at ifindex %d, its ENI %s has %d (up %v)", a.ContainerID, a.IP, got, a.ENI, want, up))
		}
	}
	return errors.Join(errs...)
}

// podsOnASecondary fills the primary ENI with pods and puts two more on a secondary one, which it returns.
func (w *world) podsOnASecondary(t *testing.T, node *controller.Node) journal.ENI {
	t.Helper()
	perENI := w.nodeInfo().Limits.IPv4PerENI - 1
	for i := range perENI + 2 {
		assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
	}
	sec := secondary(node.Snapshot())
	if len(sec) == 0 {
		t.Fatal("no secondary ENI holds pods")
	}
	return sec[0]
}

// TestPodsOfAReattachedENIGetTheirDatapathBack: someone detaches a secondary ENI that holds pods; the node
// attaches it again, and its interface comes back with a new index. The pods' datapath entries must be
// rewritten for it, not left pointing at the old interface.
func TestPodsOfAReattachedENIGetTheirDatapathBack(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	dp := newNetdevs()
	node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: dp}).node
	waitReady(t, node)
	sec := w.podsOnASecondary(t, node)
	if err := dp.stale(node); err != nil {
		t.Fatalf("before the detach: %v", err)
	}
	outsider := w.ec2(nil)
	if _, err := outsider.DetachNetworkInterface(context.Background(), &ec2.DetachNetworkInterfaceInput{
		AttachmentId: aws.String(sec.AttachmentID), Force: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ENI detached behind the node's back attached again", func() error {
		for _, e := range secondary(node.Snapshot()) {
			if e.ID == sec.ID && e.AttachmentID != sec.AttachmentID {
				return nil
			}
		}
		return fmt.Errorf("ENI %s not attached again yet", sec.ID)
	})
	eventually(t, 20*time.Second, "every pod's entry pointing at its ENI's interface", func() error { return dp.stale(node) })
}

// TestAPodWhoseDatapathFailsAtStartIsRetried: after a restart the datapath refuses the pods' setup for a
// while. The node must keep trying, with backoff, until every pod has its datapath again.
func TestAPodWhoseDatapathFailsAtStartIsRetried(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	for i := range 3 {
		assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
	}
	r.stop()

	dp := newNetdevs()
	dp.setFailing(true)
	node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: dp}).node
	waitReady(t, node)
	w.passVirtual(30*time.Second, nil)
	if err := dp.stale(node); err == nil {
		t.Fatal("pods have a datapath although every PodUp failed")
	}
	dp.setFailing(false)
	eventually(t, 20*time.Second, "every pod's datapath set up once PodUp works again", func() error { return dp.stale(node) })
}
