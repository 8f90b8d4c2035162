package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// A full node is a healthy node: with every ENI full and kubelet's max pods reached, the node stays Ready,
// the pods beyond its room wait Pending or fail ADD naming the cause, and the plugin's CNI STATUS succeeds
// (a runtime that calls STATUS, containerd's go-cni from 2.x, would otherwise turn the node NotReady and
// evict its pods). Debian's containerd 1.6 on these machines does not call STATUS, so the case runs it on
// the node itself as a runtime would, and watches the node's Ready condition as a whole.
//
// Two cases share the wait: fillNode fills node 2 right after the Deployment case and starts watching; the
// cases in between (Services, probes, paths, the vanished netns) create no pod on node 2 and tolerate it
// full; fullNodeStayedReady then waits out what is left of E2E_FULL_NODE_MINUTES (default 10) since the fill,
// checks, and empties the node again before the rolling update needs room on it.

const (
	fillNodeCase      = "2b. node 2 filled to its max pods: every ENI full, more pods Pending or failing ADD with the cause, CNI STATUS succeeds"
	fullNodeReadyCase = "4g. node 2, full, stayed Ready the whole time; the pods beyond its room still wait"
	// fullBeyond is how many pods the Deployment asks for beyond kubelet's max pods.
	fullBeyond = 2
	fullApp    = "full"
	// noIPCause is what the plugin's failed ADD says; agentNoIPCause is the agent's, followed by why the pool
	// cannot grow (here: the ENI limit).
	noIPCause      = "no IP address is free on this node"
	agentNoIPCause = "no free IP in the warm pool: "
)

// fullNode is node 2 once filled: when, how, and the watch of its Ready condition.
type fullNode struct {
	since   time.Time
	maxPods int
	watch   *readyWatch
	// failedADDs is what case 2c counted of the failing pods' FailedCreatePodSandBox events.
	failedADDs int
}

// fullNodeWait is how long the full node must stay Ready: E2E_FULL_NODE_MINUTES, default 10.
func fullNodeWait() time.Duration {
	if m, err := strconv.ParseFloat(os.Getenv("E2E_FULL_NODE_MINUTES"), 64); err == nil && m > 0 {
		return time.Duration(m * float64(time.Minute))
	}
	return 10 * time.Minute
}

// fillNode fills node 2 to kubelet's max pods with a Deployment that asks for fullBeyond more, waits until the
// pods settle, checks what each one does, runs CNI STATUS on the node, and starts watching its Ready condition.
func (s *suite) fillNode(t *testing.T) string {
	ctx := context.Background()
	n := s.node2
	node, err := s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	maxPods := int(node.Status.Allocatable.Pods().Value())
	held, err := s.podsOn(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	replicas := maxPods - held + fullBeyond
	start := time.Now()
	mustCreate(t, fullApp, s.c.Client.AppsV1().Deployments(ns).Create, deployment(fullApp, n.Name, int32(replicas)))
	var f fullPods
	for end := time.Now().Add(4 * time.Minute); ; time.Sleep(2 * time.Second) {
		if f, err = s.fullPods(ctx, n, maxPods); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("node %s did not settle full within 4 minutes: %v", short(n.Name), err)
		}
	}
	took := time.Since(start)
	if err := cniStatus(ctx, n); err != nil {
		t.Errorf("CNI STATUS on the full node: %v", err)
	}
	ready, msg, err := s.c.NodeReady(ctx, n.Name)
	if err != nil || !ready {
		t.Fatalf("node %s full: Ready %v (%s) %v", short(n.Name), ready, msg, err)
	}
	s.full = &fullNode{since: time.Now(), maxPods: maxPods, watch: watchReady(s.c, n.Name)}
	return fmt.Sprintf("%s (--max-pods %d) full in %.0fs: %s; CNI STATUS succeeds", short(n.Name), maxPods, took.Seconds(), f)
}

// fullCauseWithin bounds the wait for a retried ADD of the pods beyond the node's room whose event names
// the full node: kubelet's back-off between one pod's sandbox retries grows to 5 minutes.
const fullCauseWithin = 6 * time.Minute

// fullNodeStayedReady waits until the node has been full for fullNodeWait, then checks that it never left
// Ready, that no pod of it was evicted, and that the pods beyond its room still wait for the cause they
// waited for; then it deletes the Deployment.
func (s *suite) fullNodeStayedReady(t *testing.T) string {
	ctx := context.Background()
	if s.full == nil {
		t.Fatalf("case %q did not fill the node", fillNodeCase)
	}
	n, full := s.node2, s.full
	s.full = nil
	defer s.emptyNode(t)
	time.Sleep(time.Until(full.since.Add(fullNodeWait())))
	polls, notReady := full.watch.stop()
	for _, p := range notReady {
		t.Errorf("node %s not Ready while full: %s", short(n.Name), p)
	}
	node, err := s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range node.Status.Conditions {
		// The condition's time has a resolution of one second.
		if c.Type == corev1.NodeReady && (c.Status != corev1.ConditionTrue || c.LastTransitionTime.Time.After(full.since.Truncate(time.Second))) {
			t.Errorf("node %s Ready condition %s since %s (%s); full since %s", short(n.Name), c.Status,
				c.LastTransitionTime.Format(time.TimeOnly), c.Message, full.since.Format(time.TimeOnly))
		}
	}
	for _, taint := range node.Spec.Taints {
		if strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			t.Errorf("node %s tainted while full: %s", short(n.Name), taint.ToString())
		}
	}
	// The pods beyond the node's room are retried by kubelet with a back-off, and the latest retry's event
	// can name another cause for a while (an agent restart of an earlier case): the check waits, up to
	// fullCauseWithin, for a retry since case 2c whose event names the full node.
	var f fullPods
	err = waitEvery(fullCauseWithin, 5*time.Second, func() error {
		var err error
		if f, err = s.fullPods(ctx, n, full.maxPods); err != nil {
			return err
		}
		if f.failedADDs <= full.failedADDs {
			return fmt.Errorf("the pods failing ADD count %d FailedCreatePodSandBox, %d at case 2c: kubelet stopped retrying", f.failedADDs, full.failedADDs)
		}
		if err := namesFullCause(f.cause); err != nil {
			return fmt.Errorf("the pods' latest FailedCreatePodSandBox: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("after %s full (a retry naming the full node awaited up to %s): %v", time.Since(full.since).Round(time.Second), fullCauseWithin, err)
	}
	if err := cniStatus(ctx, n); err != nil {
		t.Errorf("CNI STATUS on the full node: %v", err)
	}
	return fmt.Sprintf("%s Ready for %s full (%d polls, Ready condition unchanged, no taint): %s", short(n.Name),
		time.Since(full.since).Round(time.Second), polls, f)
}

// emptyNode deletes the full Deployment and waits until its pods are gone.
func (s *suite) emptyNode(t *testing.T) {
	ctx := context.Background()
	if err := s.c.Client.AppsV1().Deployments(ns).Delete(ctx, fullApp, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting Deployment %s: %v", fullApp, err)
		return
	}
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		pods, err := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + fullApp})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Errorf("the pods of Deployment %s did not go within 2 minutes", fullApp)
			return
		}
	}
}

// podsOn counts the pods bound to n that hold a place of its max pods (not finished).
func (s *suite) podsOn(ctx context.Context, n *cluster.Node) (int, error) {
	pods, err := s.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		return 0, err
	}
	held := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			held++
		}
	}
	return held, nil
}

// fullPods is what the full Deployment's pods do: Running with an address, scheduled and failing ADD with
// the named cause, or Pending unscheduled because the node has no room; and what the agent reports.
type fullPods struct {
	running, failingADD, pending int
	cause                        string
	enis, assigned               int
	// failedADDs counts the failing pods' FailedCreatePodSandBox events (kubelet's retries of their ADD).
	failedADDs int
}

func (f fullPods) String() string {
	return fmt.Sprintf("%d pods Running, every ENI full (%d ENIs, %d IPs assigned, 0 warm); %d failing ADD (%q); %d Pending (Too many pods)",
		f.running, f.enis, f.assigned, f.failingADD, f.cause, f.pending)
}

// fullPods returns the full Deployment's pods' states once they add up: the node holds maxPods pods, every
// one of the Deployment's is in one of the three states, and the agent has every ENI full with none warm.
// Until then, the error says what is missing.
func (s *suite) fullPods(ctx context.Context, n *cluster.Node, maxPods int) (fullPods, error) {
	var f fullPods
	if held, err := s.podsOn(ctx, n); err != nil || held != maxPods {
		return f, fmt.Errorf("%d pods bound to the node (%v), want its max pods %d", held, err, maxPods)
	}
	st, err := s.c.AgentStatus(ctx, n.Name)
	if err != nil {
		return f, err
	}
	f.enis, f.assigned = len(st.ENIs), st.Assigned
	if len(st.ENIs) != st.MaxENIs || st.Warm != 0 {
		return f, fmt.Errorf("agent: %d of %d ENIs, %d warm; want every ENI, none warm", len(st.ENIs), st.MaxENIs, st.Warm)
	}
	pods, err := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + fullApp})
	if err != nil {
		return f, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Status.Phase == corev1.PodRunning && podReady(p) && p.Status.PodIP != "":
			f.running++
		case p.Spec.NodeName == "":
			msg := unschedulable(p)
			if !strings.Contains(msg, "Too many pods") {
				return f, fmt.Errorf("pod %s not scheduled: %q, want Too many pods", p.Name, msg)
			}
			f.pending++
		default:
			failed, err := s.sandboxFailures(ctx, "involvedObject.name="+p.Name, func(string) bool { return true })
			if err != nil {
				return f, err
			}
			msg := failed.latest
			if !strings.Contains(msg, noIPCause) || !strings.Contains(msg, agentNoIPCause) {
				return f, fmt.Errorf("pod %s on the node, not running: %q; want its ADD failing with %q and the agent's cause", p.Name, msg, noIPCause)
			}
			f.failingADD++
			f.failedADDs += failed.count
			f.cause = msg[strings.Index(msg, noIPCause):]
		}
	}
	if f.running+f.failingADD+f.pending != len(pods.Items) || f.pending == 0 {
		return f, fmt.Errorf("%s, of %d pods; want some Pending beyond the max pods", f, len(pods.Items))
	}
	return f, nil
}

// unschedulable is the message of a pod's PodScheduled=False condition.
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// sandboxFailed is what the FailedCreatePodSandBox events of some pods say: how many failures they count
// (kubelet folds repeats of one message into one event with a count) and the latest message.
type sandboxFailed struct {
	count  int
	latest string
	last   time.Time
}

// sandboxFailures adds up the FailedCreatePodSandBox events of the test's namespace that the field selector
// (on top of the reason) and pod, given the pod's name, select.
func (s *suite) sandboxFailures(ctx context.Context, selector string, pod func(name string) bool) (sandboxFailed, error) {
	var f sandboxFailed
	fields := "reason=FailedCreatePodSandBox"
	if selector != "" {
		fields += "," + selector
	}
	evs, err := s.c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields})
	if err != nil {
		return f, err
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind != "Pod" || !pod(e.InvolvedObject.Name) {
			continue
		}
		f.count += max(int(e.Count), 1)
		if t := e.LastTimestamp.Time; f.latest == "" || t.After(f.last) {
			f.latest, f.last = e.Message, t
		}
	}
	return f, nil
}

// cniStatus runs the plugin's STATUS on the node as a runtime does.
func cniStatus(ctx context.Context, n *cluster.Node) error {
	if out, err := cniPlugin(ctx, n, "CNI_COMMAND=STATUS"); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// cniPlugin runs the node's eniwire plugin on the node as a runtime does: the conflist's eniwire entry with
// the list's name and spec version 1.1.0 (the first with STATUS) on stdin, the CNI_ variables in env. It
// returns the plugin's standard output: its result, or its error as JSON.
func cniPlugin(ctx context.Context, n *cluster.Node, env ...string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(n.Mount.Root, "etc/cni/net.d/10-eniwire.conflist"))
	if err != nil {
		return nil, err
	}
	var list struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Plugins) == 0 {
		return nil, fmt.Errorf("reading the node's conflist: %v (%d plugins)", err, len(list.Plugins))
	}
	conf := list.Plugins[0]
	conf["name"], conf["cniVersion"] = list.Name, "1.1.0"
	stdin, _ := json.Marshal(conf)
	cmd := n.NS().Command(ctx, "/opt/cni/bin/eniwire")
	cmd.Env = append(append(os.Environ(), "CNI_PATH=/opt/cni/bin"), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd.Output()
}

// readyWatch polls a node's Ready condition until stopped, keeping every poll that did not find it True.
type readyWatch struct {
	stopc chan struct{}
	done  sync.WaitGroup

	mu       sync.Mutex
	polls    int
	notReady []string
}

func watchReady(c *cluster.Cluster, node string) *readyWatch {
	w := &readyWatch{stopc: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ready, msg, err := c.NodeReady(ctx, node)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.polls++
				if !ready {
					w.notReady = append(w.notReady, time.Now().Format(time.TimeOnly)+": "+msg)
				}
			}
			w.mu.Unlock()
			select {
			case <-w.stopc:
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return w
}

// stop ends the watch and returns how many polls answered and those that found the node not Ready.
func (w *readyWatch) stop() (int, []string) {
	close(w.stopc)
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.notReady
}
