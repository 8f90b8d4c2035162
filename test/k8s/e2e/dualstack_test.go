package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// runDual is a dual-stack cluster's run (IP_FAMILY=dual), after case 1: pods with an IPv4 of the VPC and an
// IPv6 of their node's /80, and a RequireDualStack Service reached over each of its ClusterIPs from a pod on
// its backends' node and from one on the other, in both kube-proxy modes.
func (s *suite) runDual(t *testing.T) {
	if !results.run(t, dualPodsCase, s.dualPods) {
		t.FailNow()
	}
	s.inEachProxyMode(t, func(mode string) {
		results.run(t, fmt.Sprintf("ds-3. [%s] a RequireDualStack Service over its IPv4 and its IPv6 ClusterIP, from node 1 and node 2", mode), s.dualStackService)
	})
}

const (
	dualPodsCase    = "ds-2. dual-stack pods: status.podIPs an IPv4 of the VPC and an IPv6 of the node's /80"
	dualWebReplicas = 3
)

// dualPods starts 3 web pods on node 1 and a client pod on each node, and checks their addresses: each pod
// has two, an IPv4 of the VPC first and an IPv6 of the one /80 EC2 lists on its node's primary ENI, none
// used twice.
func (s *suite) dualPods(t *testing.T) string {
	pods, took := s.startWebAndClients(t, dualWebReplicas, 0)
	prefixes := map[string]netip.Prefix{}
	for _, n := range s.c.Nodes {
		p, err := s.primarySlash80(n.Instance.PrimaryENI)
		if err != nil {
			t.Fatalf("node %s: %v", short(n.Name), err)
		}
		prefixes[n.Name] = p
	}
	vpc := netip.MustParsePrefix(s.node1.Instance.VPCCIDR)
	seen := map[netip.Addr]string{}
	for _, p := range pods {
		var addrs []netip.Addr
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) != 2 || !vpc.Contains(addrs[0]) || !prefixes[p.Spec.NodeName].Contains(addrs[1]) {
			t.Errorf("pod %s on %s has the addresses %v, want an IPv4 of %s and an IPv6 of its node's /80 %s", p.Name,
				short(p.Spec.NodeName), p.Status.PodIPs, vpc, prefixes[p.Spec.NodeName])
			continue
		}
		for _, a := range addrs {
			if other, dup := seen[a]; dup {
				t.Errorf("pods %s and %s share %s", other, p.Name, a)
			}
			seen[a] = p.Name
		}
		switch p.Name {
		case "client1":
			s.client1 = p.Status.PodIP
		case "client2":
			s.client2 = p.Status.PodIP
		}
	}
	return fmt.Sprintf("%d pods Running in %.0fs with %d addresses; node 1's /80 %s, node 2's %s", len(pods), took.Seconds(), len(seen),
		prefixes[s.node1.Name], prefixes[s.node2.Name])
}

// primarySlash80 is the one IPv6 /80 EC2 lists on the ENI.
func (s *suite) primarySlash80(eni string) (netip.Prefix, error) {
	e, ok := s.c.Sim.ENI(eni)
	if !ok || len(e.IPv6Prefixes) != 1 {
		return netip.Prefix{}, fmt.Errorf("ENI %s holds the IPv6 prefixes %v, want one /80", eni, e.IPv6Prefixes)
	}
	return netip.ParsePrefix(e.IPv6Prefixes[0])
}

// dualStackService makes (once) the Service web with ipFamilyPolicy RequireDualStack and has the client on
// node 1 (its backends' node) and the one on node 2 dial each of its ClusterIPs over TCP and UDP.
func (s *suite) dualStackService(t *testing.T) string {
	ctx := context.Background()
	svc, err := s.c.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		want := service("web", "web", corev1.ServiceTypeClusterIP, false)
		want.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		svc = mustCreate(t, "Service web", s.c.Client.CoreV1().Services(ns).Create, want)
		if err := s.waitEndpoints(ctx, ns, "web"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // kube-proxy programs a new Service within a second or two
	}
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("Service web has the ClusterIPs %v, want one of each family", svc.Spec.ClusterIPs)
	}
	var figures []string
	for _, ip := range svc.Spec.ClusterIPs {
		for _, from := range []struct {
			node   int
			client string
		}{{1, s.client1}, {2, s.client2}} {
			n := s.c.Nodes[from.node-1]
			figures = append(figures, fmt.Sprintf("node %d to %s: %s", from.node, ip, s.expectDial(t, n, from.client, ip, "web-")))
		}
	}
	return strings.Join(figures, "; ")
}
