package main

import (
	"bytes"
	"context"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/eniwire/eniwire/controller/agent"
	"github.com/eniwire/eniwire/controller/policywatch"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// discardDriver takes every write.
type discardDriver struct{}

func (discardDriver) SetPodPolicy(context.Context, netip.Addr, dptypes.PodPolicy) error { return nil }
func (discardDriver) ClearPodPolicy(context.Context, netip.Addr) error                  { return nil }

// policyAgent serves a NetworkPolicy watch of node-a over a fake API server on a unix socket, as the agent
// does: shop/web (10.0.1.10) under a policy allowing app=client (10.0.2.20) to TCP 8080.
func policyAgent(t *testing.T) string {
	t.Helper()
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(8080)
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"kubernetes.io/metadata.name": "shop"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.1.10"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "client", UID: "u2", Labels: map[string]string{"app": "client"}},
			Spec: corev1.PodSpec{NodeName: "node-b"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.2.20"}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "allow-client"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				}},
			}},
	)
	w, err := policywatch.New(policywatch.Config{NodeName: "node-a", Client: client, Driver: discardDriver{}, Recorder: record.NewFakeRecorder(10)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = w.Run(ctx) }()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := agent.ListenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = agent.Serve(ctx, l, agent.WithPolicy(http.NotFoundHandler(), w, nil)) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(w.Status(), "enforcing") {
		if time.Now().After(deadline) {
			t.Fatalf("the watch never synced: %s", w.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sock
}

func TestPolicyPrintsThePodsRulesAndExplainsAFlow(t *testing.T) {
	sock := policyAgent(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "shop/web", "--socket", sock}, `pod shop/web at 10.0.1.10
selected by: shop/allow-client
ingress: isolated, 1 peer prefixes (the longest prefix holding a peer decides)
  FROM          PORTS
  10.0.2.20/32  tcp/8080
egress: not isolated
`},
		{[]string{"policy", "shop/web", "--socket", sock, "--explain", "from 10.0.2.20 tcp/8080"},
			"from 10.0.2.20 tcp/8080: allowed by shop/allow-client: its ingress rules allow 10.0.2.20 (entry 10.0.2.20/32: tcp/8080); " +
				"the peer is pod shop/client of node node-b, whose agent judges its side: eniwirectl policy shop/client --explain 'to 10.0.1.10 tcp/8080' there\n"},
		{[]string{"policy", "--socket", sock, "shop/web", "--explain", "from 10.0.9.9 udp/53"},
			"from 10.0.9.9 udp/53: denied: ingress is isolated by shop/allow-client, and no rule of theirs names a peer that holds 10.0.9.9\n"},
	} {
		var out bytes.Buffer
		if err := run(c.args, &out); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !strings.HasSuffix(out.String(), c.want) {
			t.Errorf("%v printed:\n%s\nwant it to end with:\n%s", c.args, out.String(), c.want)
		}
	}
	if err := run([]string{"policy", "shop/web", "--socket", sock, "--explain", "sideways 10.0.0.1"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "from|to ADDRESS") {
		t.Errorf("a flow that does not parse: %v, want the syntax in the error", err)
	}
	if err := run([]string{"policy", "shop/gone", "--socket", sock}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no pod shop/gone") {
		t.Errorf("a pod not on the node: %v", err)
	}
}
