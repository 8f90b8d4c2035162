package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probeMinutes is how long the probed-port case watches (E2E_PROBE_MINUTES, default 5).
func probeMinutes() float64 {
	if m, err := strconv.ParseFloat(os.Getenv("E2E_PROBE_MINUTES"), 64); err == nil && m > 0 {
		return m
	}
	return 5
}

// probes: the web pods' HTTP readiness and TCP liveness probes (every 2 s, from the kubelet on the node)
// keep passing, and the same pods stay reachable on the probed port from the VPC host and from a pod of
// node 2 for minutes: the node's own connections to a port must not take that port from everyone else.
func (s *suite) probes(t *testing.T) string {
	ctx := context.Background()
	pods, err := waitPodsReady(ctx, s.c, ns, "app=web", webReplicas, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sample := pods[:5]
	duration := time.Duration(probeMinutes() * float64(time.Minute))
	// What the case guards against, the node's connections taking the port, fails every try; a try that
	// fails alone (a reply later than the client's timeout on a busy machine) is tried again at once and
	// counted as a retry, and only a probe whose retry fails too counts as failed.
	var vpcOK, vpcAll, podOK, podAll, retries int
	var firstErr, firstRetried string
	probe := func(try func() (string, bool)) bool {
		why, ok := try()
		if ok {
			return true
		}
		retries++
		if firstRetried == "" {
			firstRetried = why
		}
		why, ok = try()
		if !ok && firstErr == "" {
			firstErr = why
		}
		return ok
	}
	for end := time.Now().Add(duration); time.Now().Before(end); time.Sleep(5 * time.Second) {
		for _, p := range sample {
			dst := net.JoinHostPort(p.Status.PodIP, "8080")
			vpcAll++
			if probe(func() (string, bool) {
				resp, err := fromVPCHost(ctx, s.c, dst)
				if err == nil && resp == p.Name {
					return "", true
				}
				return fmt.Sprintf("VPC host to %s (%s): %q %v; what the packets did:%s", p.Name, dst, resp, err, diagnose(ctx, s.node1, p.Status.PodIP)), false
			}) {
				vpcOK++
			}
			podAll++
			if probe(func() (string, bool) {
				r, err := dialFrom(ctx, s.node2, s.client2, "http", p.Status.PodIP, 8080, 1)
				if err == nil && len(r.Responses) == 1 && r.Responses[0] == p.Name {
					return "", true
				}
				return fmt.Sprintf("pod of node 2 to %s (%s): %v %v; what the packets did:%s", p.Name, dst, err, r.Errors, diagnose(ctx, s.node1, p.Status.PodIP)), false
			}) {
				podOK++
			}
		}
	}
	if vpcOK != vpcAll || podOK != podAll {
		t.Errorf("probed pods reachable: from the VPC host %d/%d, from node 2 %d/%d; first failure (its retry failed too): %s", vpcOK, vpcAll, podOK, podAll, firstErr)
	}
	if retries > 0 {
		t.Logf("%d probes passed on their retry; the first one's failure: %s", retries, firstRetried)
	}
	restarts := 0
	list, err := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	notReady := 0
	for _, p := range list.Items {
		if !podReady(&p) {
			notReady++
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts += int(cs.RestartCount)
		}
	}
	if notReady > 0 || restarts > 0 {
		t.Errorf("after %s of probes: %d web pods not Ready, %d restarts (liveness failures)", duration, notReady, restarts)
	}
	return fmt.Sprintf("%.0f min of probes every 2 s: VPC host %d/%d, node 2 pod %d/%d (%d passed on a retry), %d restarts", duration.Minutes(), vpcOK, vpcAll, podOK, podAll, retries, restarts)
}
