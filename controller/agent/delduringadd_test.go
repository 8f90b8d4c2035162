package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/test/simworld"
)

// vethRecorder is a datapath that records what it was last told about each pod's IP and host veth, as the
// agent's own datapath holds them: PodUp routes the IP and claims the veth (cancelling a queued removal),
// PodDown unroutes the IP and queues the veth's removal. Its first PodUp is slow: it returns when the test
// opens the gate or when the caller gives up on it (its context ends), having done its work either way, as
// netlink writes that do not look at a context would.
type vethRecorder struct {
	dptypes.NoDriver
	entered chan struct{}
	gate    chan struct{}

	mu     sync.Mutex
	calls  int
	routed map[string]bool   // by IP
	veths  map[string]string // by host veth: "kept" or "removal queued"
}

func (d *vethRecorder) RemovesHostVeth() bool { return true }

func (d *vethRecorder) PodUp(ctx context.Context, p dptypes.Pod) error {
	d.mu.Lock()
	d.calls++
	slow := d.calls == 1
	d.mu.Unlock()
	if slow {
		close(d.entered)
		select {
		case <-d.gate:
		case <-ctx.Done():
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routed[p.IP.String()] = true
	d.veths[p.HostVeth] = "kept"
	return nil
}

func (d *vethRecorder) PodDown(_ context.Context, p dptypes.Pod) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.routed, p.IP.String())
	d.veths[p.HostVeth] = "removal queued"
	return nil
}

func (d *vethRecorder) state(ip, veth string) (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.routed[ip], d.veths[veth]
}

// TestADELDuringItsADDWins: the runtime kills the plugin at its timeout while the agent is still setting up
// the pod's datapath, and sends the DEL. The DEL wins: the ADD fails, the released IP is routed nowhere,
// and the host veth's removal stays queued (the late ADD must not cancel it).
func TestADELDuringItsADDWins(t *testing.T) {
	w := simworld.New(t, simworld.Options{Type: "m5.large", Factor: 200})
	dp := &vethRecorder{entered: make(chan struct{}), gate: make(chan struct{}), routed: map[string]bool{}, veths: map[string]string{}}
	node := w.NewNodeWith(t, controller.Config{StateDir: t.TempDir(), PoolInterval: time.Second, WarmIPTarget: 5},
		controller.Deps{Datapath: dp})
	_, client := simworld.Serve(t, node)
	simworld.WaitStatus(t, client, "a warm pool", func(st *api.Status) bool { return st.Warm >= 5 })

	att := api.Attachment{ContainerID: "c1", IfName: "eth0"}
	type result struct {
		a   *api.Assignment
		err error
	}
	add, del := make(chan result, 1), make(chan *api.ReleaseResponse, 1)
	go func() {
		a, err := client.Assign(context.Background(), api.AssignRequest{Attachment: att, HostVeth: "eniwc1"})
		add <- result{a, err}
	}()
	select {
	case <-dp.entered:
	case r := <-add:
		t.Fatalf("the ADD answered %+v, %v without setting up the datapath", r.a, r.err)
	}
	ip := node.Snapshot().Assignment("c1", "eth0").IP
	go func() {
		r, err := client.Release(context.Background(), api.ReleaseRequest{Attachment: att})
		if err != nil {
			t.Errorf("DEL: %v", err)
		}
		del <- r
	}()
	var added result
	select {
	case r := <-del:
		// The DEL did not wait for the ADD: the slow setup finishes only now.
		close(dp.gate)
		added = <-add
		del <- r
	case added = <-add:
	case <-time.After(20 * time.Second):
		t.Fatal("neither the ADD nor the DEL answered")
	}
	r := <-del
	if added.err == nil {
		t.Errorf("the ADD answered success (%s) although a DEL of the container came while it was in flight", added.a.IP)
	}
	if r == nil || !r.Released || r.HostVethRemoval != api.HostVethRemovalAgent {
		t.Errorf("the DEL answered %+v, want released with the veth left to the agent", r)
	}
	if a := node.Snapshot().Assignment("c1", "eth0"); a != nil {
		t.Errorf("the books still hold %+v after the DEL", a)
	}
	if routed, veth := dp.state(ip, "eniwc1"); routed || veth != "removal queued" {
		t.Errorf("after the DEL the released IP %s is routed: %v; the host veth: %q, want its removal queued", ip, routed, veth)
	}
}
