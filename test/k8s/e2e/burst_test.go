package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// A burst meets an empty pool: the 100 pods of one Deployment land together on a node that has just joined
// the cluster, as after an autoscaler's scale-up, whose pool holds only what eniwire's default settings keep
// warm: one /28 prefix (WARM_PREFIX_TARGET=1) in prefix mode, one ENI's secondary IPs (WARM_ENI_TARGET=1)
// otherwise; the other IPs the pods need do not exist yet. Every pod must run without one failed sandbox:
// an ADD that finds no free IP while the pool grows must wait for the growth rather than fail (kubelet
// reports each failure as a FailedCreatePodSandBox event and retries the pod only after a back-off).
//
// The node is an m5.4xlarge, the smallest type of the simulator whose ENIs address 110 pods with secondary
// IPs (8 ENIs of 29), so kubelet's --max-pods is 110 in both modes. Each case adds its own node, so its pool
// is fresh (a reused node keeps the IPs of its earlier pods: WARM_ENI_TARGET gives none back), and removes
// it after, as scale-in does.

const (
	burstPrefixCase    = "10a. 100 pods onto a new node's empty pool, /28 prefixes: all Running, no FailedCreatePodSandBox"
	burstSecondaryCase = "10b. 100 pods onto a new node's empty pool, secondary IPs: all Running, no FailedCreatePodSandBox"
	burstPods          = 100
	burstNodeType      = "m5.4xlarge"
)

// burstCase is the burst in one mode, as a case.
func (s *suite) burstCase(prefixes bool) func(*testing.T) string {
	return func(t *testing.T) string { return s.burst(t, prefixes) }
}

// burst sets the mode, adds a node, waits until its pool has settled at what the settings keep, applies a
// Deployment of burstPods pods pinned to it and waits until all run; then it counts the FailedCreatePodSandBox
// events of those pods (0 wanted), checks their addresses against EC2 and the agent, and removes the
// Deployment and the node.
func (s *suite) burst(t *testing.T, prefixes bool) string {
	ctx := context.Background()
	mode, app := "secondary IPs", "burst-secondary"
	if prefixes {
		mode, app = "/28 prefixes", "burst-prefix"
	}
	s.setAgentEnv(t, "ENABLE_PREFIX_DELEGATION="+strconv.FormatBool(prefixes))
	n, err := s.c.AddNode(ctx, burstNodeType)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.c.RemoveNode(ctx, n); err != nil {
			t.Errorf("removing node %s: %v", short(n.Name), err)
		}
	}()
	if err := s.c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := s.waitPoolSettled(ctx, n, prefixes)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	mustCreate(t, app, s.c.Client.AppsV1().Deployments(ns).Create, deployment(app, n.Name, burstPods))
	defer s.deleteDeployment(t, app)
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
	if failed.count != 0 {
		t.Errorf("%d FailedCreatePodSandBox for the burst's pods, want 0; the latest: %q", failed.count, failed.latest)
	}
	checkPodAddresses(t, s.c, n, pods)
	after, err := s.c.AgentStatus(ctx, n.Name)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s (%s, --max-pods %d, %s): pool at the apply %d free IPs on %d ENI; %d pods Running %.0fs after the apply (Ready %.0fs); %d FailedCreatePodSandBox; then %d ENIs, %d IPs assigned, %d warm",
		short(n.Name), n.Instance.Type, after.MaxPods, mode, before.Warm, len(before.ENIs), len(pods), running.Seconds(), ready.Seconds(),
		failed.count, len(after.ENIs), after.Assigned, after.Warm)
}

// waitPoolSettled waits until the agent on n is ready in the mode asked for, with nothing in flight and its
// pool holding exactly what the default settings keep free: one prefix's addresses, or one ENI's secondary IPs.
func (s *suite) waitPoolSettled(ctx context.Context, n *cluster.Node, prefixes bool) (*api.Status, error) {
	var last string
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		st, err := s.c.AgentStatus(ctx, n.Name)
		if err != nil {
			last = err.Error()
			continue
		}
		keep := st.IPsPerENI
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

// setAgentEnv sets environment variables of the agent (KEY=VALUE) on the DaemonSet and waits until the
// rollout is done; a value it already has changes nothing.
func (s *suite) setAgentEnv(t *testing.T, env ...string) {
	t.Helper()
	kubectl(t, s.c, append([]string{"set", "env", "-n", "kube-system", "daemonset/eniwire", "-c", "agent"}, env...)...)
	kubectl(t, s.c, "rollout", "status", "-n", "kube-system", "daemonset/eniwire", "--timeout=3m")
}
