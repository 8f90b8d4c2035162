package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/nodeready"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// The kubelets register with the startup taint (cluster.Node's --register-with-taints, as deploy/README.md
// asks); case 1 records it before eniwire is installed, and these cases check what the agent did with it and
// with the eniwire.io/IPAMReady condition.

const (
	startupTaintCase = "1b. startup taint on each node until its agent holds IPs; the agent may change its own Node alone"
	ipamReadyCase    = "1c. eniwire.io/IPAMReady False (SubnetExhausted) while the subnet is exhausted, True after"
	// nodeNameExtra is the user extra of a pod-bound service account token naming the pod's node.
	nodeNameExtra = "authentication.kubernetes.io/node-name"
	drainApp      = "drain"
)

// recordStartupTaints notes which nodes carry the startup taint before eniwire is installed (case 1).
func (s *suite) recordStartupTaints(ctx context.Context, t *testing.T) {
	s.taintedAtStart = map[string]bool{}
	for _, n := range s.c.Nodes {
		node, err := s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.taintedAtStart[n.Name] = hasStartupTaint(node)
	}
}

func hasStartupTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == nodeready.TaintKey && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// ipamReady is the node's eniwire.io/IPAMReady condition, or nil.
func ipamReady(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == nodeready.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// startupTaint: every node registered with the taint; once its agent is ready the taint is gone and the
// condition True. Then, with a token bound to node 1's agent pod (what kubelet mounts into it), the API server
// shows the node's name in the token's user extra, refuses the agent's change of node 2 and of another taint
// of its own node, and takes its change of its own node's status.
func (s *suite) startupTaint(t *testing.T) string {
	ctx := context.Background()
	var figures []string
	for _, n := range s.c.Nodes {
		if !s.taintedAtStart[n.Name] {
			t.Errorf("node %s did not carry %s before eniwire was installed", short(n.Name), nodeready.TaintKey)
		}
		var node *corev1.Node
		err := waitFor(time.Minute, func() error {
			var err error
			if node, err = s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if hasStartupTaint(node) {
				return fmt.Errorf("still tainted")
			}
			if c := ipamReady(node); c == nil || c.Status != corev1.ConditionTrue {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("node %s: %v", short(n.Name), err)
		}
		c := ipamReady(node)
		figures = append(figures, fmt.Sprintf("%s untainted, IPAMReady True (%s)", short(n.Name), c.Reason))
	}

	agent := s.agentClient(ctx, t, s.node1)
	own, other := s.node1.Name, s.node2.Name
	label := []byte(`{"metadata":{"labels":{"eniwire.io/e2e":"x"}}}`)
	_, err := agent.CoreV1().Nodes().Patch(ctx, other, types.StrategicMergePatchType, label, metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the Node its pod runs on") {
		t.Errorf("node 1's agent labelling node 2: %v, want the policy's refusal", err)
	}
	taint := []byte(`{"spec":{"taints":[{"key":"eniwire.io/e2e","effect":"NoSchedule"}]}}`)
	_, err = agent.CoreV1().Nodes().Patch(ctx, own, types.StrategicMergePatchType, taint, metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the taint") {
		t.Errorf("node 1's agent adding another taint to node 1: %v, want the policy's refusal", err)
	}
	if _, err := agent.CoreV1().Nodes().Patch(ctx, own, types.StrategicMergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("node 1's agent patching node 1's status: %v", err)
	}
	return strings.Join(figures, "; ") + "; node 1's agent token: changing node 2 and another taint refused, its own status taken"
}

// agentClient is a client with a token bound to the node's agent pod, as kubelet requests for it, after
// checking that the API server reads the node's name from it.
func (s *suite) agentClient(ctx context.Context, t *testing.T, n *cluster.Node) kubernetes.Interface {
	t.Helper()
	pod, err := s.c.AgentPod(ctx, n.Name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.c.Client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token bound to %s: %v", pod.Name, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", s.c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review with the agent's token: %v", err)
	}
	if got := review.Status.UserInfo.Extra[nodeNameExtra]; len(got) != 1 || got[0] != n.Name {
		t.Fatalf("the agent's token names node %v in %s, want %s (user %s)", got, nodeNameExtra, n.Name, review.Status.UserInfo.Username)
	}
	return client
}

// ipamReadyFollowsTheSubnet exhausts the subnet, takes node 1's free IPs with pods, and waits for the
// condition to turn False with SubnetExhausted; then gives the addresses back, deletes the pods, and waits for
// True: the pods' IPs come back after their cooldown (IP_COOLDOWN_PERIOD, 2 min), or new ones once the pool
// tries the subnet again (subnet discovery passes over a subnet that refused for 5 minutes).
func (s *suite) ipamReadyFollowsTheSubnet(t *testing.T) string {
	ctx := context.Background()
	n := s.node1
	subnet := n.Instance.SubnetID
	start := time.Now()
	taken, err := s.c.Sim.ExhaustSubnet(subnet, 0)
	if err != nil {
		t.Fatal(err)
	}
	refilled := false
	refill := func() {
		if !refilled {
			refilled = true
			if _, err := s.c.Sim.RefillSubnet(subnet); err != nil {
				t.Errorf("refilling %s: %v", subnet, err)
			}
		}
	}
	defer refill()
	var st *api.Status
	if err := waitFor(time.Minute, func() error {
		if st, err = s.c.AgentStatus(ctx, n.Name); err != nil {
			return err
		}
		if len(st.Pending) > 0 {
			return fmt.Errorf("%d operations pending", len(st.Pending))
		}
		return nil
	}); err != nil {
		t.Fatalf("node %s settling: %v", short(n.Name), err)
	}
	mustCreate(t, drainApp, s.c.Client.AppsV1().Deployments(ns).Create, deployment(drainApp, n.Name, int32(st.Warm)))
	defer s.deletePods(t, drainApp)
	if _, err := waitPodsReady(ctx, s.c, ns, "app="+drainApp, st.Warm, 2*time.Minute); err != nil {
		t.Fatalf("%d pods taking the free IPs: %v", st.Warm, err)
	}
	c, err := s.waitIPAMReady(ctx, n, corev1.ConditionFalse, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c.Reason != api.PoolSubnetExhausted || !strings.Contains(c.Message, subnet) {
		t.Errorf("condition False for %s (%s), want %s naming %s", c.Reason, c.Message, api.PoolSubnetExhausted, subnet)
	}
	falseIn := time.Since(start)
	refill()
	back := time.Now()
	if err := s.c.Client.AppsV1().Deployments(ns).Delete(ctx, drainApp, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err = s.waitIPAMReady(ctx, n, corev1.ConditionTrue, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s: %d addresses taken, %d free IPs given to pods; False (%s) %.0fs after the exhaustion; True (%s) %.0fs after the refill and the pods' deletion",
		short(n.Name), taken, st.Warm, api.PoolSubnetExhausted, falseIn.Seconds(), c.Reason, time.Since(back).Seconds())
}

// waitIPAMReady waits until the node's condition has status, and returns it.
func (s *suite) waitIPAMReady(ctx context.Context, n *cluster.Node, status corev1.ConditionStatus, within time.Duration) (*corev1.NodeCondition, error) {
	var c *corev1.NodeCondition
	err := waitFor(within, func() error {
		node, err := s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c = ipamReady(node); c == nil || c.Status != status {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("node %s IPAMReady not %s within %s: %w", short(n.Name), status, within, err)
	}
	return c, nil
}

// deletePods deletes the Deployment if it is still there and waits until its pods are gone.
func (s *suite) deletePods(t *testing.T, app string) {
	ctx := context.Background()
	if err := s.c.Client.AppsV1().Deployments(ns).Delete(ctx, app, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Deployment %s: %v", app, err)
		return
	}
	if err := waitFor(2*time.Minute, func() error {
		pods, err := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err == nil && len(pods.Items) > 0 {
			err = fmt.Errorf("%d pods left", len(pods.Items))
		}
		return err
	}); err != nil {
		t.Errorf("the pods of Deployment %s: %v", app, err)
	}
}
