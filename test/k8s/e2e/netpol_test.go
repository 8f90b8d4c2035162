package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// The NetworkPolicy cases (issue 24) share three namespaces: np-server holds a netexec backend on each node
// behind a Service whose ports differ from its targetPorts, and is isolated by a default deny with an allow
// from np-allowed; np-allowed and np-other each hold a client pod on node 1, and np-allowed may send only to
// np-server. The harness sends from inside the client pods' network namespaces, so the packets leave the pod
// as an application's would.
const (
	npServer, npAllowed, npOther = "np-server", "np-allowed", "np-other"
	// enforceWithin bounds the time from a policy change to its enforcement on the nodes.
	enforceWithin = 20 * time.Second
	// deniedWait is how long a probe that must be dropped waits for an answer.
	deniedWait = time.Second

	netpolServiceCase = "11a. NetworkPolicy: default deny and an allow from one namespace, through a Service (80 -> 8080), backends on both nodes"
	netpolExplainCase = "11e. NetworkPolicy: eniwirectl policy and policy --explain on the node"
)

// netpolCase is one NetworkPolicy case.
type netpolCase struct {
	name string
	run  func(t *testing.T) string
}

func (s *suite) netpolCases() []netpolCase {
	return []netpolCase{
		{netpolServiceCase, s.netpolService},
		{netpolFirstPacketCase, s.netpolFirstPacket},
		{netpolCutCase, s.netpolCut},
		{netpolAgentDeletedCase, s.netpolAgentDeleted},
		{netpolExplainCase, s.netpolExplain},
		{netpolLatencyCase, s.netpolLatency},
	}
}

// netpolSetup is what the cases share, made by the first that runs.
type netpolSetup struct {
	backend1, backend2        corev1.Pod // np-server, on node 1 and node 2
	same, other               *corev1.Service
	allowedNetns, otherNetns  string // the client pods' network namespaces
	allowedIP, otherIP        string
	beforeAllowed, beforeDeny string // what the clients reached before any policy
}

// netpolSetupOnce makes the namespaces, pods, Services and policies, and waits until the policies hold.
func (s *suite) netpolSetupOnce(t *testing.T) *netpolSetup {
	t.Helper()
	if s.np != nil {
		return s.np
	}
	ctx := context.Background()
	core := s.c.Client.CoreV1()
	for _, name := range []string{npServer, npAllowed, npOther} {
		mustCreate(t, "namespace "+name, core.Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	place := []struct{ namespace, name, node string }{
		{npServer, "backend-1", s.node1.Name}, {npServer, "backend-2", s.node2.Name},
		{npAllowed, "client", s.node1.Name}, {npOther, "client", s.node1.Name},
	}
	for _, p := range place {
		mustCreate(t, p.namespace+"/"+p.name, core.Pods(p.namespace).Create, podIn(p.namespace, p.name, p.node))
	}
	same := mustCreate(t, "Service same", core.Services(npServer).Create, serviceIn(npServer, "same", "backend-1"))
	other := mustCreate(t, "Service other", core.Services(npServer).Create, serviceIn(npServer, "other", "backend-2"))
	ready := map[string]corev1.Pod{}
	for _, p := range place {
		pods, err := waitPodsReady(ctx, s.c, p.namespace, "app="+p.name, 1, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ready[p.namespace+"/"+p.name] = pods[0]
	}
	for _, svc := range []string{"same", "other"} {
		if err := s.waitEndpoints(ctx, npServer, svc); err != nil {
			t.Fatal(err)
		}
	}
	np := &netpolSetup{backend1: ready[npServer+"/backend-1"], backend2: ready[npServer+"/backend-2"], same: same, other: other,
		allowedIP: ready[npAllowed+"/client"].Status.PodIP, otherIP: ready[npOther+"/client"].Status.PodIP}
	var err error
	if np.allowedNetns, err = podNetns(ctx, s.node1, npAllowed, "client"); err != nil {
		t.Fatal(err)
	}
	if np.otherNetns, err = podNetns(ctx, s.node1, npOther, "client"); err != nil {
		t.Fatal(err)
	}
	// Before any policy both clients reach both Services: a later refusal is the policy's doing.
	if err := waitFor(time.Minute, func() error { return np.expect(allowedState(np, false)) }); err != nil {
		t.Fatalf("before any policy: %v", err)
	}
	s.np = np
	return np
}

// podIn is a netexec pod named name (and labelled app=name) in namespace on node.
func podIn(namespace, name, node string) *corev1.Pod {
	p := pod(name, node, 0)
	p.Namespace = namespace
	return p
}

// serviceIn is a ClusterIP Service in namespace for app's pods: TCP 80 -> 8080, UDP 81 -> 8081.
func serviceIn(namespace, name, app string) *corev1.Service {
	svc := service(name, app, corev1.ServiceTypeClusterIP, false)
	svc.Namespace = namespace
	return svc
}

// removeNetpol deletes the cases' namespaces (and their policies) and waits until they are gone, so the
// cases after them find the nodes as before; it does nothing when no NetworkPolicy case ran.
func (s *suite) removeNetpol(t *testing.T) {
	if s.np == nil {
		return
	}
	ctx := context.Background()
	for _, name := range []string{npServer, npAllowed, npOther} {
		if err := s.c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	}
	err := waitFor(2*time.Minute, func() error {
		for _, name := range []string{npServer, npAllowed, npOther} {
			if _, err := s.c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%v)", name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	s.np = nil
}

// The policies.

func tcpUDPPorts(tcp, udp int32) []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(tcp))},
		{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(udp))},
	}
}

func inNamespace(name string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: name}}}
}

// serverPolicies isolate np-server's pods for ingress and allow np-allowed to their target ports, and let
// np-allowed's pods send only to np-server's on those ports: through a Service (port 80) that egress rule
// holds only if it is judged on the backend after kube-proxy's DNAT (port 8080).
func serverPolicies() []*networkingv1.NetworkPolicy {
	return []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: npServer},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "allow-from-np-allowed", Namespace: npServer},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{inNamespace(npAllowed)}, Ports: tcpUDPPorts(8080, 8081)}},
			}},
		{ObjectMeta: metav1.ObjectMeta{Name: "egress-to-np-server", Namespace: npAllowed},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{inNamespace(npServer)}, Ports: tcpUDPPorts(8080, 8081)}},
			}},
	}
}

// createPolicy creates the policy, or leaves it as it is when an earlier case made it.
func (s *suite) createPolicy(t *testing.T, p *networkingv1.NetworkPolicy) {
	t.Helper()
	_, err := s.c.Client.NetworkingV1().NetworkPolicies(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating NetworkPolicy %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func (s *suite) deletePolicy(t *testing.T, namespace, name string) {
	t.Helper()
	if err := s.c.Client.NetworkingV1().NetworkPolicies(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting NetworkPolicy %s/%s: %v", namespace, name, err)
	}
}

// The probes.

// probe is one send from a client pod's network namespace: TCP fetches http://addr/hostname, UDP sends
// "hostname" to addr; answered says whether the reply came from a pod whose name starts with backend.
type probe struct {
	what, netns, proto, addr, backend string
	answered                          bool
}

// try sends once and returns the answer, waiting at most wait.
func (p probe) try(wait time.Duration) (string, error) {
	if p.proto == "tcp" {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		return get(ctx, p.netns, "http://"+p.addr+"/hostname")
	}
	var conn net.Conn
	if err := vpcfabric.Do(p.netns, func() error {
		var err error
		conn, err = net.Dial("udp", p.addr)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	if _, err := conn.Write([]byte("hostname")); err != nil {
		return "", err
	}
	var b [256]byte
	n, err := conn.Read(b[:])
	return strings.TrimSpace(string(b[:n])), err
}

// check sends once and says how the outcome differs from what the probe expects, or nil.
func (p probe) check() error {
	wait := 3 * time.Second
	if !p.answered {
		wait = deniedWait
	}
	answer, err := p.try(wait)
	got := err == nil && strings.HasPrefix(answer, p.backend)
	switch {
	case p.answered && !got:
		return fmt.Errorf("%s: no answer from %s* (%q, %v)", p.what, p.backend, answer, err)
	case !p.answered && err == nil:
		return fmt.Errorf("%s: answered %q, want no answer", p.what, answer)
	}
	return nil
}

// count sends n times and returns how many answered as the probe expects.
func (p probe) count(n int) (int, error) {
	ok := 0
	var last error
	for range n {
		if err := p.check(); err != nil {
			last = err
		} else {
			ok++
		}
	}
	return ok, last
}

// expect checks every probe once and joins what differed.
func (np *netpolSetup) expect(probes []probe) error {
	var errs []error
	for _, p := range probes {
		errs = append(errs, p.check())
	}
	return errors.Join(errs...)
}

// allowedState lists the probes of the Service case: with policies, np-other is refused on both
// protocols and both nodes and np-allowed may send nowhere but to np-server; without, everyone answers.
func allowedState(np *netpolSetup, policies bool) []probe {
	svc := func(v *corev1.Service, port int32) string { return fmt.Sprintf("%s:%d", v.Spec.ClusterIP, port) }
	return []probe{
		{"np-allowed to Service same (node 1) TCP", np.allowedNetns, "tcp", svc(np.same, 80), "backend-1", true},
		{"np-allowed to Service same (node 1) UDP", np.allowedNetns, "udp", svc(np.same, 81), "backend-1", true},
		{"np-allowed to Service other (node 2) TCP", np.allowedNetns, "tcp", svc(np.other, 80), "backend-2", true},
		{"np-allowed to Service other (node 2) UDP", np.allowedNetns, "udp", svc(np.other, 81), "backend-2", true},
		{"np-other to Service same (node 1) TCP", np.otherNetns, "tcp", svc(np.same, 80), "backend-1", !policies},
		{"np-other to Service same (node 1) UDP", np.otherNetns, "udp", svc(np.same, 81), "backend-1", !policies},
		{"np-other to Service other (node 2) TCP", np.otherNetns, "tcp", svc(np.other, 80), "backend-2", !policies},
		{"np-other to Service other (node 2) UDP", np.otherNetns, "udp", svc(np.other, 81), "backend-2", !policies},
		{"np-allowed to the np-other pod (egress outside np-server) TCP", np.allowedNetns, "tcp", np.otherIP + ":8080", "client", !policies},
	}
}

// waitFor calls f every 200 ms until it returns nil or within has passed, and returns its last error.
func waitFor(within time.Duration, f func() error) error {
	return waitEvery(within, 200*time.Millisecond, f)
}

// waitEvery calls f every interval until it returns nil or within has passed, and returns its last error.
func waitEvery(within, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}

// netpolService: the policies are created, enforced within enforceWithin, and then every allowed probe
// answers `tries` times out of `tries` and every denied one none of 3 times.
func (s *suite) netpolService(t *testing.T) string {
	np := s.netpolSetupOnce(t)
	start := time.Now()
	for _, p := range serverPolicies() {
		s.createPolicy(t, p)
	}
	if err := waitFor(enforceWithin, func() error { return np.expect(allowedState(np, true)) }); err != nil {
		t.Fatalf("%s after the policies were created: %v%s%s", enforceWithin, err, diagnose(context.Background(), s.node1, np.backend1.Status.PodIP),
			diagnose(context.Background(), s.node2, np.backend2.Status.PodIP))
	}
	took := time.Since(start)
	var figures []string
	for _, p := range allowedState(np, true) {
		n := 3
		if p.answered {
			n = tries
		}
		ok, err := p.count(n)
		if ok != n {
			t.Errorf("%s: %d/%d as expected; last: %v", p.what, ok, n, err)
		}
		verb := map[bool]string{true: "answered", false: "refused"}[p.answered]
		figures = append(figures, fmt.Sprintf("%s %s %d/%d", p.what, verb, ok, n))
	}
	return fmt.Sprintf("enforced within %.1fs of the create (a round of probes takes about 5s); %s", took.Seconds(), strings.Join(figures, ", "))
}

// netpolExplain asks node 1's agent what it compiled for backend-1 and why a flow from np-allowed is
// allowed and one from np-other is not: the answers must name the policies.
func (s *suite) netpolExplain(t *testing.T) string {
	np := s.netpolSetupOnce(t)
	for _, p := range serverPolicies() {
		s.createPolicy(t, p)
	}
	pod := npServer + "/backend-1"
	rules, err := s.policyReport(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rules.Policies, npServer+"/default-deny") || !slices.Contains(rules.Policies, npServer+"/allow-from-np-allowed") || !rules.IngressIsolated {
		t.Errorf("eniwirectl policy %s: want ingress isolated by both policies; got %+v", pod, rules)
	}
	// The flow syntax is eniwirectl's: "from PEER tcp/PORT" is a flow the peer opens to the pod.
	flow := func(from string) string { return "from " + from + " tcp/8080" }
	allowed, err := s.policyReport(pod, flow(np.allowedIP))
	if err != nil {
		t.Fatal(err)
	}
	if e := allowed.Explanation; e == nil || !e.Allowed || !slices.Equal(e.AllowedBy, []string{npServer + "/allow-from-np-allowed"}) {
		t.Errorf("eniwirectl policy %s --explain %q: want allowed by %s/allow-from-np-allowed; got %+v", pod, flow(np.allowedIP), npServer, e)
	}
	denied, err := s.policyReport(pod, flow(np.otherIP))
	if err != nil {
		t.Fatal(err)
	}
	if e := denied.Explanation; e == nil || e.Allowed || !strings.Contains(e.Reason, "default-deny") {
		t.Errorf("eniwirectl policy %s --explain %q: want denied, the isolating default-deny named; got %+v", pod, flow(np.otherIP), e)
	}
	return fmt.Sprintf("%s: ingress isolated by %s, %d peer prefixes; %q: %s; %q: %s", pod, strings.Join(rules.Policies, ", "), len(rules.Ingress),
		flow(np.allowedIP), explanation(allowed), flow(np.otherIP), explanation(denied))
}

// policyReport is `eniwirectl policy POD [--explain FLOW] --output json` on node 1.
func (s *suite) policyReport(pod, flow string) (*api.PolicyReport, error) {
	args := []string{"policy", pod, "--output", "json"}
	if flow != "" {
		args = append(args, "--explain", flow)
	}
	out, err := s.c.Eniwirectl(context.Background(), s.node1.Name, args...)
	if err != nil {
		return nil, fmt.Errorf("eniwirectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	var r api.PolicyReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("decoding eniwirectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return &r, nil
}

func explanation(r *api.PolicyReport) string {
	if r.Explanation == nil {
		return "no explanation"
	}
	return r.Explanation.Reason
}
