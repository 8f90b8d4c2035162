package policywatch

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/test/simworld"
)

// podsUp is a datapath that records each PodUp in the policy driver's log, so the test sees both in order.
type podsUp struct {
	dptypes.NoDriver
	d *fakeDriver
}

func (p podsUp) PodUp(_ context.Context, pod dptypes.Pod) error {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.d.calls = append(p.d.calls, "podUp "+pod.IP.String())
	return nil
}

// TestAnADDUnderADenyPolicyAnswersAfterTheStateIsWrittenAndBeforeThePodIsUp: a whole node controller
// (against the EC2 simulator) gated by the watch: the runtime's ADD for a pod that a deny policy selects
// comes before the API server has the pod. It must not be answered until the pod is in the watch; then the
// pod's isolated state is written before the datapath brings the pod up, and the answer comes after both.
func TestAnADDUnderADenyPolicyAnswersAfterTheStateIsWrittenAndBeforeThePodIsUp(t *testing.T) {
	d := newFakeDriver()
	s := start(t, d, namespace("shop", nil), policy("shop", "deny", "web", "", 0))
	sw := simworld.New(t, simworld.Options{Type: "m5.large", Factor: 100})
	node := sw.NewNodeWith(t, controller.Config{PoolInterval: time.Second, WarmIPTarget: 3}, controller.Deps{Datapath: podsUp{d: d}, PodGate: s.w})
	_, c := simworld.Serve(t, node)

	req := api.AssignRequest{Attachment: api.Attachment{ContainerID: "0123456789abcdef0123", IfName: "eth0"},
		Pod: api.PodIdentity{Namespace: "shop", Name: "web", UID: "uid-web"}, HostVeth: "eniw0123"}
	answered := make(chan *api.Assignment, 1)
	go func() {
		for {
			a, err := c.Assign(context.Background(), req)
			if err == nil {
				answered <- a
				return
			}
			if api.ErrorCode(err) != api.CodeNoIPAvailable {
				t.Errorf("ADD: %v", err)
				answered <- nil
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	select {
	case a := <-answered:
		t.Fatalf("the ADD answered %+v before the API server had the pod", a)
	case <-time.After(300 * time.Millisecond):
	}
	p := pod("shop", "web", "node-a", "", map[string]string{"app": "web"})
	p.Status.Phase = corev1.PodPending
	if _, err := s.client.CoreV1().Pods("shop").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var a *api.Assignment
	select {
	case a = <-answered:
	case <-time.After(15 * time.Second):
		t.Fatal("the ADD never answered once the pod was in the watch")
	}
	if a == nil {
		t.FailNow()
	}
	ip := netip.MustParseAddr(a.IP)
	if st, ok := d.get(ip); !ok || !st.IngressIsolated || len(st.Ingress) != 0 {
		t.Fatalf("when the ADD answered, %s had %s (%v), want isolated, nothing allowed", ip, describe(st), ok)
	}
	d.mu.Lock()
	calls := slices.Clone(d.calls)
	d.mu.Unlock()
	set, up := slices.Index(calls, "set "+a.IP), slices.Index(calls, "podUp "+a.IP)
	if set < 0 || up < 0 || set > up {
		t.Errorf("calls %v: want the pod's policy set before the pod comes up", calls)
	}
}
