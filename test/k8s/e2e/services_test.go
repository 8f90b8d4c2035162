package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

const (
	tries    = 10
	hostPort = 18080
)

// serviceCase is one Service scenario, run once per kube-proxy mode.
type serviceCase struct {
	name string
	run  func(t *testing.T) string
}

// svcs are the Services and extra pods the cases use, made before the first mode runs.
type svcs struct {
	web, remote, solo               *corev1.Service // ClusterIP
	nodePortCluster, nodePortLocal  *corev1.Service
	soloIP, hostPortIP, hostPortPod string
}

func (s *suite) serviceCases() []serviceCase {
	setup := func(t *testing.T) *svcs {
		if s.svcs == nil {
			s.svcs = s.makeServices(t)
		}
		return s.svcs
	}
	cases := []serviceCase{
		{"ClusterIP TCP and UDP, backend on the same node", func(t *testing.T) string {
			v := setup(t)
			return s.expectDial(t, s.node1, s.client1, v.web.Spec.ClusterIP, "web-")
		}},
		{"ClusterIP TCP and UDP, backend on the other node", func(t *testing.T) string {
			v := setup(t)
			return s.expectDial(t, s.node1, s.client1, v.remote.Spec.ClusterIP, "remote-") + "; node 2 to node 1: " +
				s.expectDial(t, s.node2, s.client2, v.web.Spec.ClusterIP, "web-")
		}},
		{"DNS: a Service name and kubernetes.default through CoreDNS", func(t *testing.T) string {
			setup(t)
			return s.dnsCase(t)
		}},
		{"a pod to its own Service", func(t *testing.T) string {
			v := setup(t)
			return s.expectDial(t, s.node1, v.soloIP, v.solo.Spec.ClusterIP, "solo-")
		}},
		{"NodePort, externalTrafficPolicy Cluster and Local, from the VPC host", func(t *testing.T) string {
			v := setup(t)
			return s.nodePortCase(t, v)
		}},
		{"hostPort from the VPC host and from a pod", func(t *testing.T) string {
			v := setup(t)
			return s.hostPortCase(t, v)
		}},
	}
	// The on-premises network reaches the VPC over IPv4 only.
	if !s.c.Family.IsIPv6() {
		cases = append(cases, serviceCase{"a client outside the VPC reaches a pod by its IP, TCP and UDP", s.onPremises})
	}
	return cases
}

// makeServices creates the Services and the solo and hostPort pods.
func (s *suite) makeServices(t *testing.T) *svcs {
	ctx := context.Background()
	core := s.c.Client.CoreV1()
	v := &svcs{}
	mustCreate(t, "solo", s.c.Client.AppsV1().Deployments(ns).Create, deployment("solo", s.node1.Name, 1))
	mustCreate(t, "hostport", core.Pods(ns).Create, pod("hostport", s.node1.Name, hostPort))
	v.web = mustCreate(t, "Service web", core.Services(ns).Create, service("web", "web", corev1.ServiceTypeClusterIP, false))
	v.remote = mustCreate(t, "Service remote", core.Services(ns).Create, service("remote", "remote", corev1.ServiceTypeClusterIP, false))
	v.solo = mustCreate(t, "Service solo", core.Services(ns).Create, service("solo", "solo", corev1.ServiceTypeClusterIP, false))
	v.nodePortCluster = mustCreate(t, "Service web-nodeport", core.Services(ns).Create, service("web-nodeport", "web", corev1.ServiceTypeNodePort, false))
	v.nodePortLocal = mustCreate(t, "Service web-local", core.Services(ns).Create, service("web-local", "web", corev1.ServiceTypeNodePort, true))
	solo, err := waitPodsReady(ctx, s.c, ns, "app=solo", 1, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v.soloIP = solo[0].Status.PodIP
	hp, err := waitPodsReady(ctx, s.c, ns, "app=hostport", 1, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v.hostPortPod, v.hostPortIP = hp[0].Name, hp[0].Status.PodIP
	// kube-proxy programs a new Service within a second or two; wait until each has its endpoints.
	for _, name := range []string{"web", "remote", "solo"} {
		if err := s.waitEndpoints(ctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	return v
}

// waitEndpoints waits until the Service's EndpointSlices list a ready endpoint.
func (s *suite) waitEndpoints(ctx context.Context, namespace, svc string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		slices, err := s.c.Client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
		if err == nil {
			for _, sl := range slices.Items {
				for _, ep := range sl.Endpoints {
					if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						return nil
					}
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("Service %s has no ready endpoint after a minute", svc)
}

// expectDial has the pod at clientIP (on node) dial the Service at ip over TCP (port 80) and UDP (81), each
// `tries` times, and requires every answer to come from a pod whose name starts with backend.
func (s *suite) expectDial(t *testing.T, node *cluster.Node, clientIP, ip, backend string) string {
	t.Helper()
	ctx := context.Background()
	var figures []string
	for _, p := range []struct {
		proto string
		port  int
	}{{"http", 80}, {"udp", 81}} {
		r, err := dialFrom(ctx, node, clientIP, p.proto, ip, p.port, tries)
		seen := map[string]bool{}
		ok := 0
		for _, resp := range r.Responses {
			if strings.HasPrefix(resp, backend) {
				ok++
				seen[resp] = true
			}
		}
		name := map[string]string{"http": "TCP", "udp": "UDP"}[p.proto]
		if err != nil || ok != tries {
			t.Errorf("%s from %s to %s:%d: %d/%d answered by %s*; err %v; errors %v; what the packets did:%s%s", name, clientIP, ip, p.port,
				ok, tries, backend, err, first(r.Errors, 2), diagnose(ctx, s.node1, ip), diagnose(ctx, s.node2, ip))
		}
		figures = append(figures, fmt.Sprintf("%s %d/%d (%d backends)", name, ok, tries, len(seen)))
	}
	return strings.Join(figures, ", ")
}

// dnsCase resolves a Service name and kubernetes.default from pods of both nodes through CoreDNS: the
// resolved names must carry traffic (the API server answers on 443 with its complaint about plain HTTP).
func (s *suite) dnsCase(t *testing.T) string {
	ctx := context.Background()
	var figures []string
	for _, c := range []struct {
		node   *cluster.Node
		client string
	}{{s.node1, s.client1}, {s.node2, s.client2}} {
		r, err := dialFrom(ctx, c.node, c.client, "http", "web.default.svc."+cluster.ClusterDomain, 80, tries)
		if err != nil || len(r.Responses) != tries {
			t.Errorf("from %s: web.default.svc: %d/%d; err %v; errors %v; what the packets did:%s%s", short(c.node.Name), len(r.Responses), tries, err,
				first(r.Errors, 2), diagnose(ctx, s.node1, s.c.Family.DNSServiceIP), diagnose(ctx, s.node2, s.c.Family.DNSServiceIP))
		}
		api, err := dialFrom(ctx, c.node, c.client, "http", "kubernetes.default.svc."+cluster.ClusterDomain, 443, 3)
		apiOK := 0
		for _, resp := range api.Responses {
			if strings.Contains(resp, "HTTPS") {
				apiOK++
			}
		}
		if err != nil || apiOK != 3 {
			t.Errorf("from %s: kubernetes.default: %d/3 answered by the API server; err %v; responses %v; errors %v", short(c.node.Name), apiOK, err, first(api.Responses, 1), first(api.Errors, 2))
		}
		figures = append(figures, fmt.Sprintf("%s: Service name %d/%d, kubernetes.default %d/3", short(c.node.Name), len(r.Responses), tries, apiOK))
	}
	if s.c.Family.IsIPv6() {
		figures = append(figures, s.dnsAAAA(t))
	}
	return strings.Join(figures, "; ")
}

// nodePortCase fetches through both NodePort Services from the VPC host: Cluster on both nodes (node 2
// forwards to node 1's pods), Local on node 1, which has the backends.
func (s *suite) nodePortCase(t *testing.T, v *svcs) string {
	ctx := context.Background()
	var figures []string
	for _, c := range []struct {
		what string
		node *cluster.Node
		port int32
	}{
		{"Cluster via node 1", s.node1, v.nodePortCluster.Spec.Ports[0].NodePort},
		{"Cluster via node 2", s.node2, v.nodePortCluster.Spec.Ports[0].NodePort},
		{"Local via node 1", s.node1, v.nodePortLocal.Spec.Ports[0].NodePort},
	} {
		dst := net.JoinHostPort(c.node.IP().String(), fmt.Sprint(c.port))
		ok := 0
		var errs []string
		for range tries {
			if resp, err := fromVPCHost(ctx, s.c, dst); err == nil && strings.HasPrefix(resp, "web-") {
				ok++
			} else {
				errs = append(errs, fmt.Sprint(resp, err))
			}
		}
		if ok != tries {
			t.Errorf("NodePort %s (%s) from the VPC host: %d/%d; errors %v; what the packets did:%s", c.what, dst, ok, tries, first(errs, 2),
				diagnose(ctx, s.node1, s.vpcHostIP().String()))
		}
		figures = append(figures, fmt.Sprintf("%s %d/%d", c.what, ok, tries))
	}
	return strings.Join(figures, ", ")
}

// hostPortCase reaches the hostPort pod through node 1's address from the VPC host and from a pod of node 2.
func (s *suite) hostPortCase(t *testing.T, v *svcs) string {
	ctx := context.Background()
	dst := net.JoinHostPort(s.node1.IP().String(), fmt.Sprint(hostPort))
	ok := 0
	var errs []string
	for range tries {
		if resp, err := fromVPCHost(ctx, s.c, dst); err == nil && resp == v.hostPortPod {
			ok++
		} else {
			errs = append(errs, fmt.Sprint(resp, err))
		}
	}
	if ok != tries {
		t.Errorf("hostPort %s from the VPC host: %d/%d; errors %v; what the packets did:%s", dst, ok, tries, first(errs, 2),
			diagnose(ctx, s.node1, v.hostPortIP))
	}
	r, err := dialFrom(ctx, s.node2, s.client2, "http", s.node1.IP().String(), hostPort, tries)
	podOK := 0
	for _, resp := range r.Responses {
		if resp == v.hostPortPod {
			podOK++
		}
	}
	if err != nil || podOK != tries {
		t.Errorf("hostPort %s from a pod of node 2: %d/%d; err %v; errors %v; what the packets did:%s", dst, podOK, tries, err, first(r.Errors, 2),
			diagnose(ctx, s.node1, v.hostPortIP))
	}
	return fmt.Sprintf("from the VPC host %d/%d, from a pod of node 2 %d/%d", ok, tries, podOK, tries)
}

// inEachProxyMode calls run once per kube-proxy mode, iptables then nftables, switching kube-proxy to each
// first.
func (s *suite) inEachProxyMode(t *testing.T, run func(mode string)) {
	for _, mode := range []string{"iptables", "nftables"} {
		if mode != s.c.ProxyMode {
			if err := s.switchProxy(context.Background(), mode); err != nil {
				t.Fatalf("switching kube-proxy to %s: %v", mode, err)
			}
		}
		run(mode)
	}
}

// switchProxy restarts kube-proxy on every node in another mode (cleaning the old mode's rules first).
func (s *suite) switchProxy(ctx context.Context, mode string) error {
	for _, n := range s.c.Nodes {
		if err := n.StartProxy(ctx, s.c.PKI, s.c.ControlPlane.Server, mode); err != nil {
			return err
		}
	}
	s.c.ProxyMode = mode
	time.Sleep(3 * time.Second) // the first sync after start
	return nil
}

func first(xs []string, n int) []string {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}
