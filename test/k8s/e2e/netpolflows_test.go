package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

const (
	netpolCutCase          = "11c. NetworkPolicy: a removed allow cuts an established flow"
	netpolAgentDeletedCase = "11d. NetworkPolicy: agent pod deleted: the allowed flow keeps answering, the denied one stays denied"
	allowVPCHost           = "allow-vpc-host"
)

// allowVPCHostPolicy lets the VPC host (an ipBlock of one address) reach backend-1's TCP 8080.
func (s *suite) allowVPCHostPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: allowVPCHost, Namespace: npServer},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "backend-1"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: s.c.Fabric.VPCHost().IP.String() + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8080))}},
			}},
		}}
}

// startAllowedFlow isolates np-server (default-deny, when no earlier case did), allows the VPC host to
// backend-1, waits until that is enforced and starts a kept-alive flow from the VPC host to it.
func (s *suite) startAllowedFlow(t *testing.T, np *netpolSetup) *flow {
	t.Helper()
	ctx := context.Background()
	s.createPolicy(t, serverPolicies()[0])
	s.createPolicy(t, s.allowVPCHostPolicy())
	dst := np.backend1.Status.PodIP + ":8080"
	if err := waitFor(enforceWithin, func() error { _, err := fromVPCHost(ctx, s.c, dst); return err }); err != nil {
		t.Fatalf("the VPC host, allowed, does not reach backend-1 after %s: %v%s", enforceWithin, err, diagnose(ctx, s.node1, np.backend1.Status.PodIP))
	}
	f := startFlow(s.c, dst, np.backend1.Name)
	if err := waitFor(10*time.Second, func() error {
		if f.ok.Load() < 10 {
			return fmt.Errorf("the flow has %d answers, %d failures", f.ok.Load(), f.failed.Load())
		}
		return nil
	}); err != nil {
		ok, failed, last := f.finish()
		t.Fatalf("the allowed flow does not run: %d answers, %d failures (last: %s)", ok, failed, last)
	}
	return f
}

// netpolCut: with a flow from the VPC host to backend-1 running on one kept-alive connection, the allow is
// deleted: the flow must stop answering within enforceWithin and get no answer after.
func (s *suite) netpolCut(t *testing.T) string {
	np := s.netpolSetupOnce(t)
	f := s.startAllowedFlow(t, np)
	s.deletePolicy(t, npServer, allowVPCHost)
	deleted := time.Now()
	last, lastAt := f.ok.Load(), deleted
	for time.Since(lastAt) < 5*time.Second && time.Since(deleted) < enforceWithin+5*time.Second {
		time.Sleep(20 * time.Millisecond)
		if n := f.ok.Load(); n != last {
			last, lastAt = n, time.Now()
		}
	}
	cutAfter := lastAt.Sub(deleted)
	time.Sleep(3 * time.Second)
	ok, failed, lastErr := f.finish()
	if ok != last {
		t.Errorf("the flow answered %d times more after its allow was deleted and it had stopped", ok-last)
	}
	if cutAfter > enforceWithin {
		t.Errorf("the flow still answered %.1fs after its allow was deleted (want at most %s)%s", cutAfter.Seconds(), enforceWithin,
			diagnose(context.Background(), s.node1, np.backend1.Status.PodIP))
	}
	when := fmt.Sprintf("last answer %.1fs after the allow was deleted", cutAfter.Seconds())
	if lastAt == deleted {
		when = "no answer after the allow was deleted (the flow asks every 100 ms)"
	}
	return fmt.Sprintf("%s; %d answers before on one kept-alive connection, none in the %.0fs after; %d requests failed (last: %s)",
		when, ok, time.Since(lastAt).Seconds(), failed, lastErr)
}

// denied is a loop of TCP connections from np-other's client to backend-1, which np-server's policies
// refuse, counting the ones answered.
type denied struct {
	tries, answered atomic.Int64
	stop            chan struct{}
	done            sync.WaitGroup
}

func startDenied(np *netpolSetup) *denied {
	d := &denied{stop: make(chan struct{})}
	p := probe{"np-other to backend-1", np.otherNetns, "tcp", np.backend1.Status.PodIP + ":8080", "backend-1", false}
	d.done.Add(1)
	go func() {
		defer d.done.Done()
		for {
			select {
			case <-d.stop:
				return
			default:
			}
			d.tries.Add(1)
			if _, err := p.try(deniedWait); err == nil {
				d.answered.Add(1)
			}
		}
	}()
	return d
}

func (d *denied) finish() (tries, answered int64) {
	close(d.stop)
	d.done.Wait()
	return d.tries.Load(), d.answered.Load()
}

// netpolAgentDeleted: with the allowed flow running and np-other trying backend-1 every second, node 1's
// agent pod is deleted (no grace) and its DaemonSet starts another: the flow must not miss an answer and
// np-other must get none, before, during and after.
func (s *suite) netpolAgentDeleted(t *testing.T) string {
	np := s.netpolSetupOnce(t)
	ctx := context.Background()
	f := s.startAllowedFlow(t, np)
	defer s.deletePolicy(t, npServer, allowVPCHost)
	d := startDenied(np)
	agent, err := s.c.AgentPod(ctx, s.node1.Name)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	start := time.Now()
	if err := s.c.Client.CoreV1().Pods("kube-system").Delete(ctx, agent.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	err = waitFor(2*time.Minute, func() error {
		p, err := s.c.AgentPod(ctx, s.node1.Name)
		if err != nil {
			return err
		}
		if p.UID == agent.UID || !podReady(p) {
			return fmt.Errorf("no new agent pod Ready on node 1 yet")
		}
		return nil
	})
	back := time.Since(start)
	time.Sleep(3 * time.Second)
	ok, failed, last := f.finish()
	tries, answered := d.finish()
	if err != nil {
		// The flows' figures still say whether the node kept enforcing without its agent.
		t.Errorf("after %s: %v; the agent's last words: %s", back.Round(time.Second), err, s.agentLastLog(ctx))
	} else if _, err := waitPodsReady(ctx, s.c, "kube-system", cluster.AgentSelector, len(s.c.Nodes), time.Minute); err != nil {
		t.Error(err)
	}
	if failed > 0 || ok == 0 {
		t.Errorf("the allowed flow while the agent was replaced: %d answers, %d failures (last: %s)", ok, failed, last)
	}
	if answered > 0 {
		t.Errorf("the denied peer was answered %d times of %d while the agent was replaced%s", answered, tries, diagnose(ctx, s.node1, np.backend1.Status.PodIP))
	}
	return fmt.Sprintf("new agent Ready %.0fs after the delete; allowed flow %d answers, %d failed; denied peer %d/%d answered",
		back.Seconds(), ok, failed, answered, tries)
}

// agentLastLog is the last line the previous run of node 1's agent container wrote (why it stopped).
func (s *suite) agentLastLog(ctx context.Context) string {
	p, err := s.c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: cluster.AgentSelector, FieldSelector: "spec.nodeName=" + s.node1.Name})
	if err != nil || len(p.Items) == 0 {
		return fmt.Sprintf("no agent pod (%v)", err)
	}
	out, _ := s.c.Kubectl(ctx, "logs", "-n", "kube-system", p.Items[0].Name, "-c", "agent", "--previous", "--tail=1")
	return strings.TrimSpace(out)
}
