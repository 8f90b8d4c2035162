package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// flow is a client in the VPC host fetching from one pod over one kept-alive connection, ten times a
// second, until stopped: it counts answers and failures.
type flow struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	done       sync.WaitGroup
	lastErr    atomic.Value
}

func startFlow(c *cluster.Cluster, dst, want string) *flow {
	f := &flow{stop: make(chan struct{})}
	client := vpcfabric.HTTPClient(c.Fabric.VPCHost().NetnsPath)
	client.Timeout = 3 * time.Second
	client.Transport.(*http.Transport).MaxConnsPerHost = 1
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		for {
			select {
			case <-f.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := client.Get("http://" + dst + "/hostname")
			if err == nil {
				var b [256]byte
				n, _ := resp.Body.Read(b[:])
				resp.Body.Close()
				if strings.TrimSpace(string(b[:n])) == want {
					f.ok.Add(1)
					continue
				}
				err = fmt.Errorf("answer %q", b[:n])
			}
			f.failed.Add(1)
			f.lastErr.Store(err.Error())
		}
	}()
	return f
}

func (f *flow) finish() (ok, failed int64, last string) {
	close(f.stop)
	f.done.Wait()
	last, _ = f.lastErr.Load().(string)
	return f.ok.Load(), f.failed.Load(), last
}

// rollingUpdate moves the DaemonSet to a second image tag (eniwire built with another version) with
// `kubectl set image`, as an upgrade does, while a client in the VPC fetches from a pod without pause.
func (s *suite) rollingUpdate(t *testing.T) string {
	ctx := context.Background()
	pods, err := waitPodsReady(ctx, s.c, ns, "app=web", webReplicas, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := startFlow(s.c, pods[0].Status.PodIP+":8080", pods[0].Name)
	time.Sleep(2 * time.Second)
	start := time.Now()
	if out, err := s.c.Kubectl(ctx, "set", "image", "-n", "kube-system", "daemonset/eniwire", "agent="+cluster.EniwireNextImage); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := s.c.Kubectl(ctx, "rollout", "status", "-n", "kube-system", "daemonset/eniwire", "--timeout=4m"); err != nil {
		t.Fatalf("rollout: %v: %s", err, out)
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	ok, failed, last := f.finish()
	for _, n := range s.c.Nodes {
		out, err := s.c.Eniwirectl(ctx, n.Name, "version")
		if err != nil || strings.TrimSpace(out) != s.c.Bins.EniwireNextVersion {
			t.Errorf("agent on %s after the update: %q %v, want version %s", short(n.Name), out, err, s.c.Bins.EniwireNextVersion)
		}
	}
	if failed > 0 || ok == 0 {
		t.Errorf("the flow during the rolling update: %d answers, %d failures (last: %s)", ok, failed, last)
	}
	if _, err := s.checkBooks(ctx); err != nil {
		t.Error(err)
	}
	return fmt.Sprintf("rolled out in %.0fs; flow %d answers, %d failed", took.Seconds(), ok, failed)
}

// agentKilledDuringScaleUp deletes node 1's agent pod while the web Deployment grows by 15, then scales it
// to 0 and back to 30: every pod runs, no IP is held twice, and the books equal EC2 with no ENI leaked.
func (s *suite) agentKilledDuringScaleUp(t *testing.T) string {
	ctx := context.Background()
	scale := func(n int32) {
		t.Helper()
		d, err := s.c.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr.To(n)
		if _, err := s.c.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agent, err := s.c.AgentPod(ctx, s.node1.Name)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	scale(webReplicas + 15)
	// Mid scale-up: once the first new pods have their address, the agent pod goes at once (no grace).
	withIP := 0
	for deadline := time.Now().Add(time.Minute); withIP < webReplicas+2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pods, err := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		withIP = 0
		for _, p := range pods.Items {
			if p.Status.PodIP != "" {
				withIP++
			}
		}
	}
	if err := s.c.Client.CoreV1().Pods("kube-system").Delete(ctx, agent.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	pods, err := waitPodsReady(ctx, s.c, ns, "app=web", webReplicas+15, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	up := time.Since(start)
	if _, err := waitPodsReady(ctx, s.c, "kube-system", cluster.AgentSelector, len(s.c.Nodes), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	checkPodAddresses(t, s.c, s.node1, pods)
	if err := s.checkNoIPTwice(ctx); err != nil {
		t.Error(err)
	}
	scale(0)
	if _, err := waitPodsReady(ctx, s.c, ns, "app=web", 0, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	scale(webReplicas)
	if pods, err = waitPodsReady(ctx, s.c, ns, "app=web", webReplicas, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	checkPodAddresses(t, s.c, s.node1, pods)
	if err := s.checkNoIPTwice(ctx); err != nil {
		t.Error(err)
	}
	enis, err := s.checkBooks(ctx)
	if err != nil {
		t.Error(err)
	}
	return fmt.Sprintf("agent deleted with %d of 45 pods addressed; all 45 Running %.0fs after the scale-up; 0 -> 30 again; ENIs %s, books = EC2, no IP twice", withIP, up.Seconds(), enis)
}
