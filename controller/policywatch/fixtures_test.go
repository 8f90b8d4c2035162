package policywatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/testenv"
)

const node = "node-a"

// fakeDriver is a dptypes.PolicyDriver that keeps what it was told, in order, and fails the writes that
// fail says to fail, as the datapath does: the pod then allows nothing.
type fakeDriver struct {
	mu     sync.Mutex
	state  map[netip.Addr]dptypes.PodPolicy
	calls  []string
	fail   func(netip.Addr, dptypes.PodPolicy) error
	change chan struct{}
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{state: map[netip.Addr]dptypes.PodPolicy{}, change: make(chan struct{})}
}

func (d *fakeDriver) SetPodPolicy(_ context.Context, a netip.Addr, p dptypes.PodPolicy) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.changed()
	d.calls = append(d.calls, "set "+a.String())
	if d.fail != nil {
		if err := d.fail(a, p); err != nil {
			d.state[a] = dptypes.PodPolicy{IngressIsolated: true, EgressIsolated: true}
			return err
		}
	}
	d.state[a] = p
	return nil
}

func (d *fakeDriver) ClearPodPolicy(_ context.Context, a netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.changed()
	d.calls = append(d.calls, "clear "+a.String())
	delete(d.state, a)
	return nil
}

func (d *fakeDriver) changed() {
	close(d.change)
	d.change = make(chan struct{})
}

func (d *fakeDriver) get(a netip.Addr) (dptypes.PodPolicy, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.state[a]
	return p, ok
}

func (d *fakeDriver) count(call string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		if c == call {
			n++
		}
	}
	return n
}

// waitFor waits until the driver's state satisfies cond, failing the test after 10 s.
func (d *fakeDriver) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		d.mu.Lock()
		ch := d.change
		d.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// started is a Watcher over a fake clientset holding objs, running until the test ends, synced.
type started struct {
	w      *Watcher
	client *fake.Clientset
	driver *fakeDriver
	events *record.FakeRecorder
	reg    *prometheus.Registry
	logs   *testenv.LogBuffer
}

func start(t *testing.T, driver *fakeDriver, objs ...runtime.Object) *started {
	t.Helper()
	client := fake.NewClientset(objs...)
	events := record.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	logs := &testenv.LogBuffer{}
	w, err := New(Config{NodeName: node, Client: client, Driver: driver, Recorder: events, Registerer: reg, PodWait: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(w.Status(), "enforcing") {
		if time.Now().After(deadline) {
			t.Fatalf("the watch never synced: %s", w.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &started{w: w, client: client, driver: driver, events: events, reg: reg, logs: logs}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// pod is a running pod of nodeName with labels and, when ip is not "", that address in status.podIPs.
func pod(ns, name, nodeName, ip string, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if ip != "" {
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	return p
}

// policy selects app=selects in ns and allows ingress from app=from pods of ns on TCP port (none: no rule,
// deny all ingress).
func policy(ns, name, selects, from string, port int) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": selects}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if from != "" {
		tcp := corev1.ProtocolTCP
		p := intstr.FromInt32(int32(port))
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": from}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
		}}
	}
	return np
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func describe(p dptypes.PodPolicy) string {
	return fmt.Sprintf("in=%v out=%v ingress=%v", p.IngressIsolated, p.EgressIsolated, peersOf(p.Ingress))
}
