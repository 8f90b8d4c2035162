package controller_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// recordingGate holds every BeforePodUp until the test opens it, recording the calls and, in the same
// order, the datapath's PodUps.
type recordingGate struct {
	dptypes.NoDriver
	open    chan struct{}
	fail    error
	mu      sync.Mutex
	steps   []string
	entered chan netip.Addr
}

func (g *recordingGate) BeforePodUp(ctx context.Context, pod api.PodIdentity, ips ...netip.Addr) error {
	g.record("gate " + pod.Namespace + "/" + pod.Name)
	g.entered <- ips[0]
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fail
}

func (g *recordingGate) PodUp(context.Context, dptypes.Pod) error {
	g.record("podUp")
	return nil
}

func (g *recordingGate) Status() string { return "enforcing: 1 pod isolated" }

func (g *recordingGate) record(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.steps = append(g.steps, s)
}

func (g *recordingGate) recorded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.steps...)
}

// TestAnADDAnswersOnlyAfterThePodGate: the ADD's pod passes the gate with the address it was given before
// the datapath brings it up, and the ADD answers only once the gate has returned; a gate's error fails the
// ADD and gives the IP back. The gate's status line is the node's NetworkPolicy status.
func TestAnADDAnswersOnlyAfterThePodGate(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	g := &recordingGate{open: make(chan struct{}), entered: make(chan netip.Addr, 4)}
	node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: g, PodGate: g}).node
	waitReady(t, node)

	req := assignReq("pod-0")
	req.Pod = api.PodIdentity{Namespace: "default", Name: "web", UID: "uid-1"}
	answered := make(chan *api.Assignment, 1)
	go func() {
		for {
			a, err := node.Assign(context.Background(), req)
			if errors.Is(err, controller.ErrNoIP) {
				time.Sleep(2 * time.Millisecond) // the warm pool is still filling
				continue
			}
			if err != nil {
				t.Error(err)
			}
			answered <- a
			return
		}
	}()
	var ip netip.Addr
	select {
	case ip = <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the ADD never reached the gate")
	}
	select {
	case a := <-answered:
		t.Fatalf("the ADD answered %s while the gate still held it", a.IP)
	case <-time.After(200 * time.Millisecond):
	}
	if got := g.recorded(); len(got) != 1 || got[0] != "gate default/web" {
		t.Fatalf("before the gate opened: %v, want only the gate", got)
	}
	close(g.open)
	a := <-answered
	if a == nil || a.IP != ip.String() {
		t.Fatalf("answer %+v, want the address the gate was told, %s", a, ip)
	}
	if got := g.recorded(); len(got) != 2 || got[1] != "podUp" {
		t.Fatalf("steps %v, want the gate, then podUp", got)
	}
	if s := node.Status().NetworkPolicy; s != "enforcing: 1 pod isolated" {
		t.Errorf("status line %q, want the gate's", s)
	}

	g.fail = errors.New("policy watch not synced")
	req2 := assignReq("pod-1")
	req2.Pod = api.PodIdentity{Namespace: "default", Name: "db", UID: "uid-2"}
	if _, err := node.Assign(context.Background(), req2); err == nil {
		t.Fatal("the ADD succeeded although the gate refused the pod")
	}
	if got := g.recorded(); len(got) != 3 {
		t.Errorf("steps %v: the refused pod must not come up", got)
	}
	if _, err := node.Check(context.Background(), api.CheckRequest{Attachment: req2.Attachment}); !errors.Is(err, controller.ErrNotFound) {
		t.Errorf("the refused ADD's IP is still assigned (Check: %v)", err)
	}
}
