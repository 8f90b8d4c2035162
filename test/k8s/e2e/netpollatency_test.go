package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// The latency benchmark (issue 24): how long a policy change takes to be enforced on both nodes, and a new
// pod that a policy allows to become reachable by its allowed peers on both nodes, as the packets show it
// (connprober_test.go). It prints figures; what it asserts is that every change is enforced and every pod
// reached, within generous bounds. It takes about 5 minutes, most of it new pods on node 2 (an m5.large)
// waiting for IPs that released pods left in IP_COOLDOWN_PERIOD, so `make e2e-k8s` skips it and
// `make bench-k8s` runs it after case 1.
const (
	netpolLatencyCase = "11f. NetworkPolicy latency: a policy change enforced on both nodes (100 changes), a new allowed pod reached from both nodes (100 pods)"
	// latencyChanges is how many times the allow is added or removed, latencyPods how many pods are made,
	// latencyBatch of them at a time (half on each node).
	latencyChanges, latencyPods, latencyBatch = 100, 100, 10
	// droppedRun is how many attempts in a row must go unanswered before a removed allow counts as enforced
	// (one alone could be an answer slower than probeWait).
	droppedRun = 5
	// reachWithin bounds the time from a new pod's address in the API to its peers reaching it.
	reachWithin = 30 * time.Second
	// batchWithin bounds a batch from its creates to its last pod reached: a pod may wait for an IP out of
	// IP_COOLDOWN_PERIOD (120 s) and for kubelet's back-off between sandbox attempts (105 s in the first run).
	batchWithin = 5 * time.Minute
	benchToggle = "bench-toggle"
)

// netpolLatency runs both halves and returns their figures.
func (s *suite) netpolLatency(t *testing.T) string {
	np := s.netpolSetupOnce(t)
	for _, p := range serverPolicies() {
		s.createPolicy(t, p)
	}
	change := s.policyChangeLatency(t, np)
	reach := s.newPodLatency(t, np)
	return change + "; " + reach
}

// togglePolicy selects every np-server pod for ingress and, when allow, lets np-other reach TCP 8080.
func togglePolicy(allow bool) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: benchToggle, Namespace: npServer},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if allow {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{inNamespace(npOther)},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8080))}}}}
	}
	return p
}

// policyChangeLatency: np-other's client (node 1) opens connections to backend-1 (node 1) and backend-2
// (node 2) every probeEvery while a policy of np-server is updated latencyChanges times, adding and
// removing np-other's allow in turn. A change counts as enforced on a node when its backend's answers flip
// (the first answer after an allow is added, the first of droppedRun unanswered attempts after it is
// removed); the figure is the later of the two nodes, from just before the update is sent.
func (s *suite) policyChangeLatency(t *testing.T, np *netpolSetup) string {
	ctx := context.Background()
	policies := s.c.Client.NetworkingV1().NetworkPolicies(npServer)
	current := mustCreate(t, "NetworkPolicy "+benchToggle, policies.Create, togglePolicy(false))
	defer s.deletePolicy(t, npServer, benchToggle)
	probers := []*prober{
		startProber("np-other to backend-1 (node 1)", np.otherNetns, np.backend1.Status.PodIP+":8080"),
		startProber("np-other to backend-2 (node 2)", np.otherNetns, np.backend2.Status.PodIP+":8080"),
	}
	defer func() {
		for _, p := range probers {
			p.finish()
		}
	}()
	for _, p := range probers {
		if _, err := p.waitSettled(time.Now(), false, droppedRun, enforceWithin); err != nil {
			t.Fatalf("before the first change: %v", err)
		}
	}
	var both []time.Duration
	perNode := make([][]time.Duration, len(probers))
	byChange := map[bool][]time.Duration{} // allow added, removed
	for i := range latencyChanges {
		allow := i%2 == 0
		next := togglePolicy(allow)
		next.ResourceVersion = current.ResourceVersion
		start := time.Now()
		var err error
		if current, err = policies.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("change %d: updating %s: %v", i+1, benchToggle, err)
		}
		run := 1
		if !allow {
			run = droppedRun
		}
		var latest time.Duration
		for n, p := range probers {
			d, err := p.waitSettled(start, allow, run, enforceWithin)
			if err != nil {
				t.Fatalf("change %d (allow %v): %v%s%s", i+1, allow, err, diagnose(ctx, s.node1, np.backend1.Status.PodIP), diagnose(ctx, s.node2, np.backend2.Status.PodIP))
			}
			perNode[n] = append(perNode[n], d)
			latest = max(latest, d)
		}
		both = append(both, latest)
		byChange[allow] = append(byChange[allow], latest)
	}
	return fmt.Sprintf("policy change -> enforced on both nodes, %d changes: %s (allow added p50 %s, removed p50 %s; node 1 p50 %s, node 2 p50 %s)",
		latencyChanges, spread(both), ms(nearestRank(byChange[true], 50)), ms(nearestRank(byChange[false], 50)),
		ms(nearestRank(perNode[0], 50)), ms(nearestRank(perNode[1], 50)))
}

// newPod is one pod of the reach half: when it was created, when the harness saw its address in the API and
// how long after that each peer's first connection got through.
type newPod struct {
	name, node, ip     string
	created, addressed time.Time
	reached            [2]time.Duration // by the np-allowed client on node 1, on node 2
	err                error
}

// newPodLatency: np-allowed holds a client on each node; np-server's policies allow np-allowed to its pods
// on TCP 8080 and np-allowed's own allow it to send only to np-server, so the peer on the other node
// reaches a new pod only once its node knows the pod's address belongs to np-server (from the pod's status
// in the API) and the pod's own node lets np-allowed in. latencyPods pause pods of np-server are made,
// latencyBatch at a time over both nodes; from the moment the harness sees a pod's address in a watch of
// the API, both clients open connections to its TCP 8080 every probeEvery (nothing listens: a RST is the
// answer) until one is answered.
func (s *suite) newPodLatency(t *testing.T, np *netpolSetup) string {
	ctx := context.Background()
	core := s.c.Client.CoreV1()
	mustCreate(t, npAllowed+"/client-2", core.Pods(npAllowed).Create, podIn(npAllowed, "client-2", s.node2.Name))
	if _, err := waitPodsReady(ctx, s.c, npAllowed, "app=client-2", 1, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	netns2, err := podNetns(ctx, s.node2, npAllowed, "client-2")
	if err != nil {
		t.Fatal(err)
	}
	peers := []string{np.allowedNetns, netns2}
	const selector = "bench=reach"
	w, err := core.Pods(npServer).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var pods []*newPod
	for b := 0; b < latencyPods; b += latencyBatch {
		batch := map[string]*newPod{}
		for i := b; i < min(b+latencyBatch, latencyPods); i++ {
			node := []string{s.node1.Name, s.node2.Name}[i%2]
			p := &newPod{name: fmt.Sprintf("reach-%03d", i), node: node}
			spec := pausePod(p.name, node, false)
			spec.Namespace, spec.Labels = npServer, map[string]string{"bench": "reach"}
			p.created = time.Now()
			mustCreate(t, npServer+"/"+p.name, core.Pods(npServer).Create, spec)
			batch[p.name], pods = p, append(pods, p)
		}
		if err := measureReach(w, batch, peers); err != nil {
			t.Fatal(err)
		}
		for _, p := range batch {
			if p.err != nil {
				node := map[string]*cluster.Node{s.node1.Name: s.node1, s.node2.Name: s.node2}[p.node]
				t.Errorf("%s on %s: %v%s", p.name, p.node, p.err, diagnose(ctx, node, p.ip))
			}
		}
		if err := core.Pods(npServer).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
			t.Fatal(err)
		}
		// The next batch starts on nodes that hold none of these pods, so no address of theirs is still
		// known as np-server's when a new pod gets it.
		if err := waitFor(time.Minute, func() error {
			l, err := core.Pods(npServer).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil && len(l.Items) > 0 {
				err = fmt.Errorf("%d pods of the batch still there", len(l.Items))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var fromAddress, fromCreate []time.Duration
	samePeer, otherPeer := []time.Duration{}, []time.Duration{}
	for i, p := range pods {
		if p.err != nil {
			continue
		}
		both := max(p.reached[0], p.reached[1])
		fromAddress = append(fromAddress, both)
		fromCreate = append(fromCreate, p.addressed.Sub(p.created)+both)
		same := i % 2 // the peer on the pod's own node
		samePeer, otherPeer = append(samePeer, p.reached[same]), append(otherPeer, p.reached[1-same])
	}
	return fmt.Sprintf("new allowed pod -> reached from both nodes, %d pods: from its address in the API %s (peer on its node p50 %s, on the other node p50 %s); from its create %s",
		len(fromAddress), spread(fromAddress), ms(nearestRank(samePeer, 50)), ms(nearestRank(otherPeer, 50)), spread(fromCreate))
}

// measureReach follows the watch until every pod of the batch has an address and both peers have reached
// it (or failed to within reachWithin), probing each pod from the moment its address is seen.
func measureReach(w watch.Interface, batch map[string]*newPod, peers []string) error {
	done := make(chan *newPod, len(batch))
	waiting := len(batch)
	deadline := time.After(batchWithin)
	for waiting > 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of the new pods ended")
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod || pod.Status.PodIP == "" {
				continue
			}
			p := batch[pod.Name]
			if p == nil || !p.addressed.IsZero() {
				continue
			}
			p.addressed, p.ip = time.Now(), pod.Status.PodIP
			go func() {
				probers := make([]*prober, len(peers))
				for i, netns := range peers {
					probers[i] = startProber(fmt.Sprintf("np-allowed on node %d to %s (%s)", i+1, p.name, p.ip), netns, p.ip+":8080")
				}
				for i, pr := range probers {
					d, err := pr.waitSettled(p.addressed, true, 1, reachWithin)
					p.reached[i] = d
					if err != nil && p.err == nil {
						p.err = err
					}
				}
				for _, pr := range probers {
					pr.finish()
				}
				done <- p
			}()
		case <-done:
			waiting--
		case <-deadline:
			var missing []string
			for name, p := range batch {
				if p.addressed.IsZero() {
					missing = append(missing, name)
				}
			}
			return fmt.Errorf("after %s, %d pods of the batch not reached; without an address: %v", batchWithin, waiting, missing)
		}
	}
	return nil
}

// spread is "p50 X ms, p99 Y ms, max Z ms" of d.
func spread(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %s, p99 %s, max %s", ms(nearestRank(d, 50)), ms(nearestRank(d, 99)), ms(slices.Max(d)))
}

// nearestRank is the p-th percentile of d by the nearest-rank method.
func nearestRank(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	return s[max((len(s)*p+99)/100-1, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
