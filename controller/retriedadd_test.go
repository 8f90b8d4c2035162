package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// slowFirstPodUp is a datapath whose first PodUp takes until the test opens the gate and then fails; every
// later PodUp succeeds at once.
type slowFirstPodUp struct {
	dptypes.NoDriver
	calls   atomic.Int32
	entered chan struct{}
	gate    chan struct{}
}

func (d *slowFirstPodUp) PodUp(context.Context, dptypes.Pod) error {
	if d.calls.Add(1) == 1 {
		close(d.entered)
		<-d.gate
		return errors.New("writing the pod's route: netlink busy")
	}
	return nil
}

// TestARetriedADDAnsweredWhileTheFirstFailsKeepsItsIP: the runtime retries an ADD whose first attempt is
// still setting up the datapath, and that first attempt then fails. The answer the retry gets must be an
// IP the books still hold for the container: the failing first attempt must not give it back to the pool
// under the retry's feet, where the next pod would get it too.
func TestARetriedADDAnsweredWhileTheFirstFailsKeepsItsIP(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	dp := &slowFirstPodUp{entered: make(chan struct{}), gate: make(chan struct{})}
	node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: dp}).node
	waitReady(t, node)

	type answer struct {
		a   *api.Assignment
		err error
	}
	first, retry := make(chan answer, 1), make(chan answer, 1)
	go func() {
		for {
			a, err := node.Assign(context.Background(), assignReq("pod-0"))
			if errors.Is(err, controller.ErrNoIP) {
				time.Sleep(2 * time.Millisecond) // the warm pool is still filling
				continue
			}
			first <- answer{a, err}
			return
		}
	}()
	select {
	case <-dp.entered:
	case f := <-first:
		t.Fatalf("the first ADD answered %+v, %v without setting up the datapath", f.a, f.err)
	}
	go func() { a, err := node.Assign(context.Background(), assignReq("pod-0")); retry <- answer{a, err} }()
	// The retry may answer before the first attempt ends (it did before the fix) or wait for it; either
	// way the first attempt fails only after the retry has had its chance.
	var got answer
	answered := false
	select {
	case got = <-retry:
		answered = true
	case <-time.After(300 * time.Millisecond):
	}
	close(dp.gate)
	if f := <-first; f.err == nil {
		t.Fatalf("the first ADD succeeded (%s) although its datapath setup failed", f.a.IP)
	}
	if !answered {
		got = <-retry
	}
	if got.err != nil {
		t.Fatalf("the retried ADD failed: %v", got.err)
	}
	if a := node.Snapshot().Assignment("pod-0", "eth0"); a == nil || a.IP != got.a.IP {
		t.Fatalf("the retried ADD answered %s, but the books hold %+v for the container: the IP went back to the pool", got.a.IP, a)
	}
	for i := 1; i <= 8; i++ {
		if a := assignRetrying(t, node, fmt.Sprintf("pod-%d", i)); a.IP == got.a.IP {
			t.Fatalf("pod-%d got %s, the IP the retried ADD of pod-0 answered", i, a.IP)
		}
	}
}
