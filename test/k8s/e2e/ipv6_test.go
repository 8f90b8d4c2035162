package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// runIPv6 is an IPv6 cluster's run (IP_FAMILY=ipv6), after case 1: IPv6 pods on the node's /80, the Service
// cases in both kube-proxy modes (ClusterIP TCP and UDP with local and remote backends, DNS with AAAA
// answers, a pod to its own Service, NodePort, hostPort), probes, and the paths out: the internet over IPv6
// (the egress-only gateway) and over IPv4 (translated to the node), the VPC host, node to pod.
func (s *suite) runIPv6(t *testing.T) {
	if !results.run(t, ipv6PodsCase, s.ipv6Pods) {
		t.FailNow()
	}
	s.inEachProxyMode(t, func(mode string) {
		for _, sc := range s.serviceCases() {
			results.run(t, fmt.Sprintf("v6-3. [%s] %s", mode, sc.name), sc.run)
		}
	})
	results.run(t, "v6-4. probes pass; probed pods reachable from the VPC host and node 2", s.probes)
	results.run(t, ipv6OutsideCase, s.ipv6PodToOutside)
}

const (
	ipv6PodsCase    = "v6-2. IPv6 pods: addresses of the /80 EC2 gave the node's primary ENI, no other ENI"
	ipv6OutsideCase = "v6-4b. pod to the internet over IPv6 (as itself) and IPv4 (as its node), the VPC host; node to pod"
)

// ipv6Pods starts the workloads the later cases use (30 web pods on node 1, 2 on node 2, a client pod on
// each) and checks their addresses: each pod has one IPv6 address, inside the one /80 EC2 lists on its
// node's primary ENI, none used twice, and no node has a secondary ENI (IPv6 mode creates none).
func (s *suite) ipv6Pods(t *testing.T) string {
	pods, took := s.startWebAndClients(t, webReplicas, 2)

	prefixes := map[string]netip.Prefix{}
	st := s.c.Sim.Snapshot()
	for _, n := range s.c.Nodes {
		for _, e := range st.ENIs {
			if e.Attachment == nil || e.Attachment.InstanceID != n.Instance.ID {
				continue
			}
			if e.ID != n.Instance.PrimaryENI {
				t.Errorf("node %s holds ENI %s besides its primary: IPv6 mode creates none", short(n.Name), e.ID)
				continue
			}
			if len(e.IPv6Prefixes) != 1 {
				t.Fatalf("node %s's primary ENI holds the IPv6 prefixes %v, want one /80", short(n.Name), e.IPv6Prefixes)
			}
			prefixes[n.Name] = netip.MustParsePrefix(e.IPv6Prefixes[0])
		}
	}
	seen := map[netip.Addr]string{}
	for _, p := range pods {
		if len(p.Status.PodIPs) != 1 {
			t.Errorf("pod %s has the addresses %v, want one IPv6 address", p.Name, p.Status.PodIPs)
			continue
		}
		a, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !a.Is6() || !prefixes[p.Spec.NodeName].Contains(a) {
			t.Errorf("pod %s on %s has %q, want an address of its node's /80 %s", p.Name, short(p.Spec.NodeName), p.Status.PodIP, prefixes[p.Spec.NodeName])
		}
		if other, dup := seen[a]; dup {
			t.Errorf("pods %s and %s share %s", other, p.Name, a)
		}
		seen[a] = p.Name
		switch p.Name {
		case "client1":
			s.client1 = p.Status.PodIP
		case "client2":
			s.client2 = p.Status.PodIP
		}
	}
	return fmt.Sprintf("%d pods Running in %.0fs; node 1's /80 %s, node 2's %s; no secondary ENI", len(pods), took.Seconds(),
		prefixes[s.node1.Name], prefixes[s.node2.Name])
}

// dnsAAAA asks cluster DNS, from node 1, for the AAAA records of a Service and of the API server's: they
// must be the Services' IPv6 addresses.
func (s *suite) dnsAAAA(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := vpcfabric.DialContext(s.node1.Netns.NetnsPath)
	dns := net.JoinHostPort(s.c.Family.DNSServiceIP, "53")
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, dns)
	}}
	web, err := s.c.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var figures []string
	for _, q := range []struct{ name, want string }{
		{"web.default.svc." + cluster.ClusterDomain, web.Spec.ClusterIP},
		{"kubernetes.default.svc." + cluster.ClusterDomain, s.c.Family.APIServiceIP},
	} {
		ips, err := r.LookupNetIP(ctx, "ip6", q.name)
		got := make([]string, len(ips))
		for i, ip := range ips {
			got[i] = ip.String()
		}
		if err != nil || len(got) != 1 || got[0] != q.want {
			t.Errorf("AAAA %s from %s: %v, %v; want %s", q.name, dns, got, err, q.want)
		}
		figures = append(figures, fmt.Sprintf("AAAA %s = %s", strings.SplitN(q.name, ".", 2)[0], strings.Join(got, ",")))
	}
	return strings.Join(figures, ", ")
}

// ipv6PodToOutside: a pod of an IPv6 cluster reaches the internet host over IPv6 as itself (through the
// egress-only gateway: IPv6 is never translated) and over IPv4 as its node (its IPv4 egress address is
// translated to the node's IPv4 address); it reaches the VPC host over IPv6 as itself; the node reaches the
// pod.
func (s *suite) ipv6PodToOutside(t *testing.T) string {
	inet, vpc := s.c.Fabric.Internet(), s.c.Fabric.VPCHost()
	whoami(t, inet.NetnsPath, ":18000")
	whoami(t, vpc.NetnsPath, ":18000")
	return s.client1SeenAs(t, []seenAs{
		{"internet over IPv6 (as itself)", inet.IPv6.String(), s.client1},
		{"internet over IPv4 (as its node)", inet.IP.String(), s.node1.Instance.PrimaryIP},
		{"VPC host over IPv6 (as itself)", vpc.IPv6.String(), s.client1},
	})
}
