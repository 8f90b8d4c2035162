package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// A burst meets an empty pool: the 100 pods of one Deployment land together on a node that has just joined
// the cluster, as after an autoscaler's scale-up, and whose pool holds next to nothing: the case sets
// WARM_IP_TARGET=1, so the pool keeps one free IP (one /28 prefix in prefix mode, which rounds up to whole
// prefixes) and every other IP the pods need is asked of EC2 while they arrive. EC2 takes time to answer, as
// in AWS, rather than answering at once: while the burst runs, CreateNetworkInterface, AttachNetworkInterface
// and AssignPrivateIpAddresses answer after burstCallLatency and an attachment takes burstAttachDelay. Every pod
// must run without one failed sandbox: an ADD that finds no free IP while the pool grows must wait for the
// growth rather than fail (kubelet reports each failure as a FailedCreatePodSandBox event and retries the
// pod only after a back-off).
//
// The node is an m5.4xlarge, the smallest type of the simulator whose ENIs address 110 pods with secondary
// IPs (8 ENIs of 29), so kubelet's --max-pods is 110 in both modes. Each case adds its own node, so its pool
// is fresh, and removes it after, as scale-in does. The settings stay as the case left them (as case 8 leaves
// prefix delegation on): a DaemonSet rollout restarts the agents one node at a time, about 45 s each.

const (
	burstPrefixCase    = "10a. 100 pods onto a new node's empty pool, /28 prefixes: all Running, no FailedCreatePodSandBox"
	burstSecondaryCase = "10b. 100 pods onto a new node's empty pool, secondary IPs: all Running, no FailedCreatePodSandBox"
	burstPods          = 100
	burstNodeType      = "m5.4xlarge"
	burstCallLatency   = 500 * time.Millisecond
	burstAttachDelay   = time.Second
)

// burstCalls are the EC2 calls that bring a node IPs, slowed down during the burst.
var burstCalls = []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses"}

// burstCase is the burst in one mode, as a case.
func (s *suite) burstCase(prefixes bool) func(*testing.T) string {
	return func(t *testing.T) string { return s.burst(t, prefixes) }
}

// burst sets the mode and WARM_IP_TARGET=1, adds a node, waits until its pool has settled at what the
// settings keep, slows EC2 down, applies a Deployment of burstPods pods pinned to the node and waits until
// all run; then it counts the FailedCreatePodSandBox events of those pods (0 wanted), checks their addresses
// against EC2 and the agent, and removes the node and its pods.
func (s *suite) burst(t *testing.T, prefixes bool) string {
	ctx := context.Background()
	mode, app := "secondary IPs", "burst-secondary"
	if prefixes {
		mode, app = "/28 prefixes", "burst-prefix"
	}
	step := func(what string) { fmt.Printf("k8s-e2e: %s %s: %s\n", time.Now().Format("15:04:05"), app, what) }
	// The new node's agent starts with the new settings while the others roll over to them.
	kubectl(t, s.c, "set", "env", "-n", "kube-system", "daemonset/eniwire", "-c", "agent",
		"ENABLE_PREFIX_DELEGATION="+strconv.FormatBool(prefixes), "WARM_IP_TARGET=1")
	n, err := s.c.AddNode(ctx, burstNodeType)
	if err != nil {
		t.Fatal(err)
	}
	defer s.endBurst(t, n, app)
	kubectl(t, s.c, "rollout", "status", "-n", "kube-system", "daemonset/eniwire", "--timeout=3m")
	if err := s.c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := s.waitPoolSettled(ctx, n, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	step(fmt.Sprintf("node %s Ready, its pool settled at %d free IPs; applying %d pods", short(n.Name), before.Warm, burstPods))

	faults := s.c.Sim.Faults()
	for _, call := range burstCalls {
		faults.SetLatency(call, burstCallLatency)
	}
	s.c.Sim.SetDelays(burstAttachDelay, 0)
	defer func() {
		for _, call := range burstCalls {
			faults.SetLatency(call, 0)
		}
		s.c.Sim.SetDelays(0, 0)
	}()
	start := time.Now()
	mustCreate(t, app, s.c.Client.AppsV1().Deployments(ns).Create, deployment(app, n.Name, burstPods))
	pods, err := waitPodsReady(ctx, s.c, ns, "app="+app, burstPods, 4*time.Minute)
	ready := time.Since(start)
	failed, ferr := s.sandboxFailures(ctx, "", func(name string) bool { return strings.HasPrefix(name, app+"-") })
	if ferr != nil {
		t.Fatal(ferr)
	}
	if err != nil {
		t.Fatalf("%v; %d FailedCreatePodSandBox for the burst's pods, the latest: %q", err, failed.count, failed.latest)
	}
	running := lastStarted(pods).Sub(start)
	step(fmt.Sprintf("%d pods Ready; %d FailedCreatePodSandBox", len(pods), failed.count))
	if failed.count != 0 {
		t.Errorf("%d FailedCreatePodSandBox for the burst's pods, want 0; the latest: %q", failed.count, failed.latest)
	}
	checkPodAddresses(t, s.c, n, pods)
	after, err := s.c.AgentStatus(ctx, n.Name)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s (%s, --max-pods %d, %s, WARM_IP_TARGET=1, EC2 calls +%s, attach %s): pool at the apply %d free IPs on %d ENI; %d pods Running %.0fs after the apply (Ready %.0fs); %d FailedCreatePodSandBox; then %d ENIs, %d IPs assigned",
		short(n.Name), n.Instance.Type, after.MaxPods, mode, burstCallLatency, burstAttachDelay, before.Warm, len(before.ENIs),
		len(pods), running.Seconds(), ready.Seconds(), failed.count, len(after.ENIs), after.Assigned)
}

// endBurst deletes the burst's Deployment and removes the node with its pods on it, as scale-in does, then
// deletes what is left of the pods' objects at once (their sandboxes went with the node).
func (s *suite) endBurst(t *testing.T, n *cluster.Node, app string) {
	ctx := context.Background()
	if err := s.c.Client.AppsV1().Deployments(ns).Delete(ctx, app, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Deployment %s: %v", app, err)
	}
	defer func() {
		fmt.Printf("k8s-e2e: %s %s: node %s removed\n", time.Now().Format("15:04:05"), app, short(n.Name))
	}()
	if err := s.c.RemoveNode(ctx, n); err != nil {
		t.Errorf("removing node %s: %v", short(n.Name), err)
	}
	if err := s.c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "app=" + app}); err != nil {
		t.Errorf("deleting the pods of %s: %v", app, err)
	}
}

// waitPoolSettled waits until the agent on n is ready in the mode asked for, with nothing in flight and its
// pool holding exactly what WARM_IP_TARGET=1 keeps free: one IP, or one prefix's addresses in prefix mode.
func (s *suite) waitPoolSettled(ctx context.Context, n *cluster.Node, prefixes bool) (*api.Status, error) {
	var last string
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		st, err := s.c.AgentStatus(ctx, n.Name)
		if err != nil {
			last = err.Error()
			continue
		}
		keep := 1
		if prefixes {
			keep = journal.PrefixAddrs
		}
		if st.Ready && st.PrefixDelegation == prefixes && len(st.Pending) == 0 && st.Warm == keep {
			return st, nil
		}
		last = fmt.Sprintf("ready %v, prefix delegation %v, %d in flight, %d warm (want %d): %s", st.Ready, st.PrefixDelegation,
			len(st.Pending), st.Warm, keep, st.PoolStatus)
	}
	return nil, fmt.Errorf("the pool of new node %s did not settle within 2 minutes: %s", short(n.Name), last)
}

// lastStarted is when the last of the pods' containers started running.
func lastStarted(pods []corev1.Pod) time.Time {
	var last time.Time
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if r := cs.State.Running; r != nil && r.StartedAt.After(last) {
				last = r.StartedAt.Time
			}
		}
	}
	return last
}
