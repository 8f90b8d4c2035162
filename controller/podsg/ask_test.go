package podsg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// short is the PodWait of the tests that wait for it to pass.
const short = 300 * time.Millisecond

func withPodWait(d time.Duration) func(*Config) { return func(c *Config) { c.PodWait = d } }

func TestAnADDWaitsForItsPodAndAnswersOnceTheWatchHasIt(t *testing.T) {
	r := start(t, setup{}, account("shop", "default", nil),
		sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA)))
	type answer struct {
		groups []string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		g, _, err := r.ask("shop", "web", "uid-web")
		got <- answer{g, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("answered %v, %v before the watch had the pod", a.groups, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := r.client.CoreV1().Pods("shop").Create(context.Background(), pod("shop", "web", "", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || !slices.Equal(a.groups, []string{sgA}) {
		t.Fatalf("answer %v, %v; want [%s]", a.groups, a.err, sgA)
	}
}

func TestAnADDWhosePodHasAnotherUIDInTheWatchWaitsThenFailsSayingSo(t *testing.T) {
	r := start(t, setup{cfg: withPodWait(short)},
		pod("shop", "web", "", map[string]string{"app": "web"}), account("shop", "default", nil),
		sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA)))
	began := time.Now()
	groups, _, err := r.ask("shop", "web", "uid-web-2")
	if err == nil {
		t.Fatalf("answered %v for a pod the watch has with another UID", groups)
	}
	if waited := time.Since(began); waited < short {
		t.Errorf("failed after %s, before PodWait (%s)", waited, short)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v does not wrap context.DeadlineExceeded", err)
	}
	contains(t, "the error", err.Error(), "pod shop/web (uid uid-web-2) not in the watch", "which has uid uid-web", short.String())
}

func TestAnADDWaitsForTheServiceAccountItsPoliciesSelectBy(t *testing.T) {
	r := start(t, setup{cfg: withPodWait(short)},
		pod("shop", "orders", "orders", nil),
		sgp("shop", "db", policySpec(nil, map[string]string{"role": "db-client"}, sgA)))
	_, _, err := r.ask("shop", "orders", "uid-orders")
	if err == nil {
		t.Fatal("answered without the pod's service account")
	}
	contains(t, "the error", err.Error(), "service account shop/orders of pod shop/orders", "not in the watch")

	if _, err := r.client.CoreV1().ServiceAccounts("shop").Create(context.Background(),
		account("shop", "orders", map[string]string{"role": "db-client"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the answer once the service account is in", func() bool {
		g, _, err := r.ask("shop", "orders", "uid-orders")
		return err == nil && slices.Equal(g, []string{sgA})
	})
}

func TestANamespaceWithoutAValidPolicyIsAnsweredAtOnceItsPodUnseen(t *testing.T) {
	r := start(t, setup{cfg: withPodWait(patience)},
		sgp("blog", "web", policySpec(map[string]string{}, nil, sgA)),
		sgp("shop", "broken", policySpec(map[string]string{}, nil, "sg-nope")))
	for _, ns := range []string{"shop", "news"} {
		ctx, cancel := context.WithTimeout(context.Background(), patience/2)
		groups, policies, err := r.w.SecurityGroupsOf(ctx, ns, "web", "uid-web")
		cancel()
		if err != nil || groups != nil || policies != nil {
			t.Errorf("%s: %v %v %v, want no groups at once", ns, groups, policies, err)
		}
	}
}

func TestAnADDBeforeTheFirstListsWaitsForThemAndSaysSo(t *testing.T) {
	// A watcher that is never run: its lists never come in.
	r := &running{}
	w, err := New(Config{NodeName: node, Client: fakeClient(), Dynamic: fakeDynamic(), PodWait: short, Recorder: newEvents()})
	if err != nil {
		t.Fatal(err)
	}
	r.w = w
	_, _, err = r.ask("shop", "web", "uid-web")
	if err == nil {
		t.Fatal("answered before the first lists")
	}
	contains(t, "the error", err.Error(), "the first lists of Pods, ServiceAccounts and SecurityGroupPolicies not in")
	contains(t, "the status", w.Status(), "listing Pods, ServiceAccounts and SecurityGroupPolicies")
}

// notInstalled answers the SecurityGroupPolicies' list as an API server without the CRD does, until
// installed is set.
func notInstalled(installed *atomic.Bool, lists *atomic.Int32) clienttesting.ReactionFunc {
	return func(clienttesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		if installed.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(securityGroupPolicies.GroupResource(), "")
	}
}

func TestWithoutTheCRDPodsGetNoGroupsAtOnceAndTheStatusSaysSo(t *testing.T) {
	var installed atomic.Bool
	var lists atomic.Int32
	r := start(t, setup{listPolicies: notInstalled(&installed, &lists)},
		pod("shop", "web", "", map[string]string{"app": "web"}), account("shop", "default", nil))

	ctx, cancel := context.WithTimeout(context.Background(), patience/2)
	defer cancel()
	groups, policies, err := r.w.SecurityGroupsOf(ctx, "shop", "web", "uid-web")
	if err != nil || groups != nil || policies != nil {
		t.Fatalf("without the CRD: %v %v %v, want no groups and no error", groups, policies, err)
	}
	contains(t, "the status", r.w.Status(), "the SecurityGroupPolicy CRD (securitygrouppolicies.vpcresources.k8s.aws) is not installed")
	contains(t, "the log", r.logs.String(), "the SecurityGroupPolicy CRD is not installed")
	if strings.Contains(r.logs.String(), "watching the Kubernetes API failed") {
		t.Errorf("the log takes the missing CRD for a failing API server:\n%s", r.logs.String())
	}

	t.Run("a CRD installed later applies", func(t *testing.T) {
		if _, err := r.dyn.Resource(securityGroupPolicies).Namespace("shop").Create(context.Background(),
			sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		installed.Store(true)
		r.waitFor(t, "the policy of the CRD installed", func() bool {
			g, _, err := r.ask("shop", "web", "uid-web")
			return err == nil && slices.Equal(g, []string{sgA})
		})
		if s := r.w.Status(); strings.Contains(s, "not installed") {
			t.Errorf("status %q still says the CRD is not installed", s)
		}
	})
}

func TestAListForbiddenIsNoAbsentCRD(t *testing.T) {
	forbidden := func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(securityGroupPolicies.GroupResource(), "", errors.New("RBAC: access denied"))
	}
	client, dyn := fakeClient(pod("shop", "web", "", nil)), fakeDynamic()
	dyn.PrependReactor("list", securityGroupPolicies.Resource, forbidden)
	w, err := New(Config{NodeName: node, Client: client, Dynamic: dyn, PodWait: short, Recorder: newEvents()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(patience)
	for {
		_, _, err = w.SecurityGroupsOf(context.Background(), "shop", "web", "uid-web")
		if err != nil && strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
			break
		}
	}
	if err == nil {
		t.Fatal("answered while the policies cannot be listed")
	}
	contains(t, "the error", err.Error(), "the first lists of Pods, ServiceAccounts and SecurityGroupPolicies not in", "forbidden")
	contains(t, "the status", w.Status(), "before the first lists", "forbidden")
}
