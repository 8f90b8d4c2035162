package podsg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/eniwire/eniwire/internal/testenv"
)

const node = "ip-10-0-1-1.ec2.internal"

// patience bounds every wait on the watch: generous, for a busy machine.
const patience = 30 * time.Second

// running is a Watcher over fake API clients, running until the test ends and synced.
type running struct {
	w      *Watcher
	client *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	events *events
	logs   *testenv.LogBuffer
}

// setup is what a test changes of the defaults: the config, the SecurityGroupPolicies' list reactor (to
// play an API server without the CRD), and what is done before Run.
type setup struct {
	cfg          func(*Config)
	listPolicies clienttesting.ReactionFunc
	beforeRun    func(*Watcher)
}

// start runs a Watcher over fakes holding objs (Pods, ServiceAccounts, and SecurityGroupPolicies as
// *unstructured.Unstructured), and waits until its first lists are in and its informers watch: the fakes'
// watches do not replay what changed between a list and its watch.
func start(t *testing.T, s setup, objs ...runtime.Object) *running {
	t.Helper()
	var typed, policies []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			policies = append(policies, o)
		} else {
			typed = append(typed, o)
		}
	}
	client, dyn := fakeClient(typed...), fakeDynamic(policies...)
	if s.listPolicies != nil {
		dyn.PrependReactor("list", securityGroupPolicies.Resource, s.listPolicies)
	}
	var watches atomic.Int32
	countWatches(&client.Fake, client.Tracker(), &watches)
	countWatches(&dyn.Fake, dyn.Tracker(), &watches)

	r := &running{client: client, dyn: dyn, events: newEvents(), logs: &testenv.LogBuffer{}}
	cfg := Config{NodeName: node, Client: client, Dynamic: dyn, PodWait: patience, Recorder: r.events,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))}
	if s.cfg != nil {
		s.cfg(&cfg)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.w = w
	if s.beforeRun != nil {
		s.beforeRun(w)
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
	want := int32(3)
	if s.listPolicies != nil {
		want = 2 // the policies' list fails: no watch follows it
	}
	r.waitFor(t, "the first lists and the watches", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.synced && watches.Load() >= want
	})
	return r
}

// fakeClient is a fake clientset holding objs.
func fakeClient(objs ...runtime.Object) *fake.Clientset { return fake.NewClientset(objs...) }

// fakeDynamic is a fake dynamic client holding the SecurityGroupPolicies policies.
func fakeDynamic(policies ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{securityGroupPolicies: "SecurityGroupPolicyList"}, policies...)
}

// countWatches makes the fake's watches itself, through its tracker, and counts them once made.
func countWatches(f *clienttesting.Fake, tracker clienttesting.ObjectTracker, n *atomic.Int32) {
	f.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace(), opts)
		if err == nil {
			n.Add(1)
		}
		return true, w, err
	})
}

// waitFor polls cond until it holds, failing the test after patience.
func (r *running) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %q", what, r.w.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ask is SecurityGroupsOf with a background context.
func (r *running) ask(namespace, name, uid string) ([]string, []string, error) {
	return r.w.SecurityGroupsOf(context.Background(), namespace, name, uid)
}

// put creates or replaces a SecurityGroupPolicy and waits until the watch holds that version.
func (r *running) put(t *testing.T, p *unstructured.Unstructured) {
	t.Helper()
	res := r.dyn.Resource(securityGroupPolicies).Namespace(p.GetNamespace())
	ctx := context.Background()
	var got *unstructured.Unstructured
	var err error
	if cur, gerr := res.Get(ctx, p.GetName(), metav1.GetOptions{}); gerr == nil {
		p = p.DeepCopy()
		p.SetResourceVersion(cur.GetResourceVersion())
		got, err = res.Update(ctx, p, metav1.UpdateOptions{})
	} else {
		got, err = res.Create(ctx, p, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	r.waitForPolicy(t, got)
}

// waitForPolicy waits until the watch's store holds this version of the policy, and the watcher what it
// says (when that differs from what it held, the handler has run, and rechecked the pods).
func (r *running) waitForPolicy(t *testing.T, p *unstructured.Unstructured) {
	t.Helper()
	key := p.GetNamespace() + "/" + p.GetName()
	want := parse(p)
	r.waitFor(t, "the watch to see "+key, func() bool {
		obj, ok, _ := r.w.policyInf.GetStore().GetByKey(key)
		if !ok || obj.(*unstructured.Unstructured).GetResourceVersion() != p.GetResourceVersion() {
			return false
		}
		r.w.mu.Lock()
		defer r.w.mu.Unlock()
		got, ok := r.w.policies[p.GetNamespace()][p.GetName()]
		return ok && slices.Equal(got.groups, want.groups) && fmt.Sprint(got.err) == fmt.Sprint(want.err)
	})
}

// sgp is a SecurityGroupPolicy of ns; the spec's maps are JSON's types (map[string]any, []any).
func sgp(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vpcresources.k8s.aws/v1beta1", "kind": "SecurityGroupPolicy",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     spec,
	}}
}

// policySpec is a policy's spec: pods and accounts are the selectors' matchLabels (nil: no such selector; an
// empty map: the empty selector).
func policySpec(pods, accounts map[string]string, groups ...string) map[string]any {
	s := map[string]any{}
	if pods != nil {
		s["podSelector"] = selector(pods)
	}
	if accounts != nil {
		s["serviceAccountSelector"] = selector(accounts)
	}
	ids := []any{}
	for _, g := range groups {
		ids = append(ids, g)
	}
	s["securityGroups"] = map[string]any{"groupIds": ids}
	return s
}

func selector(matchLabels map[string]string) map[string]any {
	if len(matchLabels) == 0 {
		return map[string]any{}
	}
	m := map[string]any{}
	for k, v := range matchLabels {
		m[k] = v
	}
	return map[string]any{"matchLabels": m}
}

// pod is a pod of this node with labels, running as service account sa ("": none named, so "default").
func pod(ns, name, sa string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: sa},
	}
}

func account(ns, name string, labels map[string]string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// Three well-formed group ids, and the form of many.
const (
	sgA = "sg-0a000000000000001"
	sgB = "sg-0b000000000000002"
	sgC = "sg-0c000000000000003"
)

func group(i int) string { return fmt.Sprintf("sg-%017x", i) }

// event is one Event the watcher wrote: on what ("Pod shop/web"), its type, reason and message.
type event struct{ on, eventType, reason, message string }

func (e event) String() string {
	return fmt.Sprintf("%s %s %s: %s", e.on, e.eventType, e.reason, e.message)
}

// events is the watcher's record.EventRecorder in tests: it keeps each Event with the object it is on.
type events struct{ ch chan event }

func newEvents() *events { return &events{ch: make(chan event, 1000)} }

func (e *events) Event(obj runtime.Object, eventType, reason, message string) {
	on := "?"
	switch o := obj.(type) {
	case *corev1.Pod:
		on = "Pod " + o.Namespace + "/" + o.Name
	case *unstructured.Unstructured:
		on = o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	e.ch <- event{on, eventType, reason, message}
}

func (e *events) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	e.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (e *events) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	e.Eventf(obj, eventType, reason, format, args...)
}

// next is the next Event, failing the test when none comes within patience.
func (e *events) next(t *testing.T) event {
	t.Helper()
	select {
	case ev := <-e.ch:
		return ev
	case <-time.After(patience):
		t.Fatal("no Event came")
		return event{}
	}
}

// none fails the test if an Event was written that the test has not read.
func (e *events) none(t *testing.T) {
	t.Helper()
	select {
	case ev := <-e.ch:
		t.Errorf("unexpected Event %s", ev)
	default:
	}
}

func contains(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s %q lacks %q", what, s, p)
		}
	}
}
