package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// lateInterfaces is a datapath whose secondary ENIs' interfaces appear only when told: until then ENIUp of a
// secondary ENI fails, as it does in the seconds between EC2's answer to the attach and the kernel's netdev.
// PodUp fails for a pod of an ENI that is not up.
type lateInterfaces struct {
	dptypes.NoDriver
	present atomic.Bool

	mu sync.Mutex
	up map[string]bool
}

func (d *lateInterfaces) ENIUp(_ context.Context, e dptypes.ENI) error {
	if !e.Primary && !d.present.Load() {
		return fmt.Errorf("finding the interface of ENI %s (MAC %s): no such device", e.ID, e.MAC)
	}
	d.mu.Lock()
	d.up[e.ID] = true
	d.mu.Unlock()
	return nil
}

func (d *lateInterfaces) PodUp(_ context.Context, p dptypes.Pod) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.up[p.ENI.ID] {
		return fmt.Errorf("routing pod %s: ENI %s is not up", p.IP, p.ENI.ID)
	}
	return nil
}

// TestIPsOfAnENIWhoseInterfaceIsNotUpAreNotHandedOut: EC2 answers the attach seconds before the interface
// appears. The node must not hand out that ENI's IPs meanwhile: each such ADD fails in the datapath, and a
// failed ADD must not burn an IP into cooldown (a burst during an attach burned one per kubelet retry).
func TestIPsOfAnENIWhoseInterfaceIsNotUpAreNotHandedOut(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	dp := &lateInterfaces{up: map[string]bool{}}
	node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: dp}).node
	waitReady(t, node)
	perENI := w.nodeInfo().Limits.IPv4PerENI - 1
	// Fill the primary: WARM_ENI_TARGET=1 attaches a secondary ENI, whose interface is not there yet.
	for i := range perENI {
		assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
	}
	eventually(t, 20*time.Second, "a usable secondary ENI in the books", func() error {
		if len(secondary(node.Snapshot())) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	// A burst of ADDs and kubelet retries while the interface is missing.
	for i := range 20 {
		_, err := node.Assign(context.Background(), api.AssignRequest{
			Attachment: api.Attachment{ContainerID: fmt.Sprintf("burst-%d", i%4), IfName: "eth0"}})
		if err == nil {
			t.Fatalf("ADD %d got an IP of an ENI whose interface is not up", i)
		}
		if !errors.Is(err, controller.ErrNoIP) {
			t.Errorf("ADD %d: %v, want the retryable ErrNoIP", i, err)
		}
	}
	if c := node.Snapshot().Cooldowns; len(c) != 0 {
		t.Fatalf("%d IPs burned into cooldown by ADDs that failed in the datapath: %+v", len(c), c)
	}
	// The status counts as warm only what a pod can take now: none of the ENI that is not up (issue 36
	// item 13: its IPs were counted, so the taint went early and the condition said ready).
	if st := node.Status(); st.Warm != 0 {
		t.Errorf("status counts %d IPs warm while the only free ones are on an ENI that is not up", st.Warm)
	}
	dp.present.Store(true)
	a := assignRetrying(t, node, "burst-0")
	if sec := secondary(node.Snapshot()); len(sec) == 0 || a.ENI != sec[0].ID {
		t.Fatalf("ADD after the interface appeared got %s of %s, want an IP of the secondary ENI", a.IP, a.ENI)
	}
}

// flakyPodUp is a datapath whose next PodUp fails.
type flakyPodUp struct {
	dptypes.NoDriver
	fail atomic.Bool
}

func (d *flakyPodUp) PodUp(context.Context, dptypes.Pod) error {
	if d.fail.Swap(false) {
		return errors.New("writing the pod's route: netlink busy")
	}
	return nil
}

// TestAnADDThatFailsInTheDatapathGivesItsIPBackWithoutCooldown: the pod never used an IP whose ADD failed
// before the agent answered, so the IP goes straight back to the pool.
func TestAnADDThatFailsInTheDatapathGivesItsIPBackWithoutCooldown(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	dp := &flakyPodUp{}
	node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: dp}).node
	waitReady(t, node)
	assignRetrying(t, node, "pod-0")
	dp.fail.Store(true)
	if _, err := node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "pod-1", IfName: "eth0"}}); err == nil {
		t.Fatal("Assign succeeded although the datapath failed")
	}
	st := node.Snapshot()
	if len(st.Cooldowns) != 0 {
		t.Fatalf("the IP of a failed ADD is in cooldown: %+v", st.Cooldowns)
	}
	if st.Assignment("pod-1", "eth0") != nil {
		t.Fatal("the failed ADD kept its assignment")
	}
}

// TestAReleaseOfAnUnusedIPSkipsTheCooldown: the plugin's ADD failed after the agent answered, before any
// container of the pod ran; its Release says so and the IP goes straight back to the pool. A plain release
// (a DEL) still cools down.
func TestAReleaseOfAnUnusedIPSkipsTheCooldown(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	node := w.start(fastConfig(w.dir), nil, nil).node
	waitReady(t, node)
	assignRetrying(t, node, "unused")
	assignRetrying(t, node, "used")
	if _, err := node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "unused", IfName: "eth0"}, Unused: true}); err != nil {
		t.Fatal(err)
	}
	if c := node.Snapshot().Cooldowns; len(c) != 0 {
		t.Fatalf("an unused IP went into cooldown: %+v", c)
	}
	if _, err := node.Release(context.Background(), api0Release("used")); err != nil {
		t.Fatal(err)
	}
	if c := node.Snapshot().Cooldowns; len(c) != 1 {
		t.Fatalf("cooldowns after a DEL: %+v, want the used IP's", c)
	}
}
