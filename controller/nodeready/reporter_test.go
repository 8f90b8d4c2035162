package nodeready_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/nodeready"
)

const nodeName = "ip-10-0-0-1.ec2.internal"

// agentStatus is a status the test changes while the reporter reads it.
type agentStatus struct {
	mu sync.Mutex
	st api.Status
}

func (a *agentStatus) set(st api.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st = st
}

func (a *agentStatus) get() *api.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.st
	return &st
}

// registered is this node as kubelet registers it with the startup taint, beside another node and another taint.
func registered() (*corev1.Node, *corev1.Node) {
	this := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: nodeready.TaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule},
	}}}
	other := this.DeepCopy()
	other.Name = "ip-10-0-0-2.ec2.internal"
	return this, other
}

// start runs a reporter on client for the status until the test ends.
func start(t *testing.T, client *fake.Clientset, status *agentStatus) {
	t.Helper()
	r, err := nodeready.New(nodeready.Config{Nodes: client.CoreV1().Nodes(), NodeName: nodeName, Status: status.get,
		Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitNode polls the node until check passes or 10 s have gone.
func waitNode(t *testing.T, client *fake.Clientset, name, what string, check func(*corev1.Node) error) *corev1.Node {
	t.Helper()
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		var n *corev1.Node
		if n, err = client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			if err = check(n); err == nil {
				return n
			}
		}
	}
	t.Fatalf("%s: %v", what, err)
	return nil
}

func condition(n *corev1.Node) (corev1.NodeCondition, error) {
	for _, c := range n.Status.Conditions {
		if c.Type == nodeready.ConditionType {
			return c, nil
		}
	}
	return corev1.NodeCondition{}, fmt.Errorf("no %s condition", nodeready.ConditionType)
}

func says(status corev1.ConditionStatus, reason string) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		c, err := condition(n)
		if err == nil && (c.Status != status || c.Reason != reason) {
			err = fmt.Errorf("condition %s %s (%s), want %s %s", c.Status, c.Reason, c.Message, status, reason)
		}
		return err
	}
}

func taints(n *corev1.Node) []string {
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key)
	}
	return keys
}

func TestTheStartupTaintGoesOnceThePoolHoldsIPs(t *testing.T) {
	this, other := registered()
	client := fake.NewClientset(this, other)
	status := &agentStatus{st: api.Status{Reason: "waiting for the first answer from EC2"}}
	start(t, client, status)

	waitNode(t, client, nodeName, "not ready while starting", says(corev1.ConditionFalse, nodeready.ReasonStarting))
	status.set(api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy})
	n := waitNode(t, client, nodeName, "ready, the pool growing", says(corev1.ConditionTrue, nodeready.ReasonPoolGrowing))
	if len(n.Spec.Taints) != 2 {
		t.Fatalf("taints %v with an empty pool, want the startup taint kept", taints(n))
	}
	status.set(api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy, Warm: 9})
	waitNode(t, client, nodeName, "the startup taint gone, the other kept", func(n *corev1.Node) error {
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
			return fmt.Errorf("taints %v", taints(n))
		}
		return says(corev1.ConditionTrue, nodeready.ReasonIPsFree)(n)
	})
	got, err := client.CoreV1().Nodes().Get(context.Background(), other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Taints) != 2 || len(got.Status.Conditions) != 0 {
		t.Errorf("another node was touched: taints %v, conditions %v", taints(got), got.Status.Conditions)
	}
}

func TestTheConditionFollowsThePool(t *testing.T) {
	this, _ := registered()
	client := fake.NewClientset(this)
	ok := api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy, Warm: 9}
	status := &agentStatus{st: ok}
	start(t, client, status)
	n := waitNode(t, client, nodeName, "ready", says(corev1.ConditionTrue, nodeready.ReasonIPsFree))
	c, _ := condition(n)
	readySince := c.LastTransitionTime

	status.set(api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy, Assigned: 9,
		PoolReason: api.PoolSubnetExhausted, PoolStatus: "subnet subnet-1 has no free addresses (InsufficientFreeAddressesInSubnet)"})
	n = waitNode(t, client, nodeName, "not ready, the subnet full", says(corev1.ConditionFalse, api.PoolSubnetExhausted))
	if c, _ = condition(n); c.Message != "subnet subnet-1 has no free addresses (InsufficientFreeAddressesInSubnet)" {
		t.Errorf("message %q, want the pool's line", c.Message)
	}
	status.set(ok)
	n = waitNode(t, client, nodeName, "ready again", says(corev1.ConditionTrue, nodeready.ReasonIPsFree))
	if c, _ = condition(n); !c.LastTransitionTime.After(readySince.Time) && !c.LastTransitionTime.Equal(&readySince) {
		t.Errorf("last transition %s, before the first %s", c.LastTransitionTime, readySince)
	}
}

func TestTheNodeIsWrittenOnChangeOnly(t *testing.T) {
	this, _ := registered()
	client := fake.NewClientset(this)
	var patches atomic.Int32
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		return false, nil, nil
	})
	status := &agentStatus{st: api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy, Warm: 9}}
	start(t, client, status)
	waitNode(t, client, nodeName, "ready, untainted", func(n *corev1.Node) error {
		if len(n.Spec.Taints) != 1 {
			return fmt.Errorf("taints %v", taints(n))
		}
		return says(corev1.ConditionTrue, nodeready.ReasonIPsFree)(n)
	})
	// 200 status reads (5 ms apart) with the same verdict.
	time.Sleep(time.Second)
	if n := patches.Load(); n != 2 {
		t.Errorf("%d patches for one verdict and one taint, want 2", n)
	}
}

func TestAnUnreachableAPIServerIsRetriedWithBackoff(t *testing.T) {
	this, _ := registered()
	client := fake.NewClientset(this)
	var refused atomic.Int32
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused.Add(1) <= 2 {
			return true, nil, errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
		}
		return false, nil, nil
	})
	status := &agentStatus{st: api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy, Warm: 9}}
	began := time.Now()
	start(t, client, status)
	waitNode(t, client, nodeName, "written after the refusals", says(corev1.ConditionTrue, nodeready.ReasonIPsFree))
	// 1 s then 2 s of backoff: the two refusals cost three seconds, not one attempt per 5 ms read.
	if took := time.Since(began); took < 3*time.Second {
		t.Errorf("written %s after two refusals, want the 1 s and 2 s backoffs", took)
	}
	if n := refused.Load(); n > 4 {
		t.Errorf("%d patch attempts, want 3 and the taint's", n)
	}
}
