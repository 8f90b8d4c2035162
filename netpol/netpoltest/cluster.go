package netpoltest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Cluster is a generated cluster of the size: its Namespaces, Pods (spread over nodes, ours among
// them) and NetworkPolicies, a realistic mix of default-deny, same-namespace pod selectors, namespace
// selectors, monitoring and DNS access, ipBlocks with except, ranges and ports by name.
type Cluster struct {
	Namespaces []*corev1.Namespace
	Pods       []*corev1.Pod
	Policies   []*networkingv1.NetworkPolicy
}

// Node is the node of the Cluster whose pods the benchmarks enforce.
const Node = "node-0"

// NewCluster generates namespaces Namespaces, pods Pods spread over nodes nodes (node-0 to node-N) and
// policies NetworkPolicies, the same for the same arguments.
func NewCluster(namespaces, pods, policies, nodes int) *Cluster {
	r := rand.New(rand.NewPCG(1, 2))
	s := &Cluster{}
	nsName := func(i int) string { return fmt.Sprintf("team%d-app%d", i%50, i) }
	envs := []string{"prod", "staging", "dev"}
	for i := range namespaces {
		s.Namespaces = append(s.Namespaces, Namespace(nsName(i), Labels{"team": fmt.Sprintf("t%d", i%50), "env": envs[i%3], corev1.LabelMetadataName: nsName(i)}))
	}
	// Namespace 0 plays kube-system (kube-dns), namespace 1 monitoring (prometheus).
	s.Namespaces[0].Labels["role"], s.Namespaces[1].Labels["role"] = "system", "monitoring"
	apps := []string{"web", "api", "worker", "cache", "db"}
	for k := range pods {
		ns := k % namespaces
		app := apps[(k/namespaces)%len(apps)]
		labels := Labels{"app": app, "pod-template-hash": fmt.Sprintf("%x", r.Uint32()), "version": fmt.Sprintf("v%d", r.IntN(3))}
		switch ns {
		case 0:
			labels["k8s-app"] = "kube-dns"
		case 1:
			labels["app"] = "prometheus"
		}
		p := Pod(nsName(ns), fmt.Sprintf("%s-%x-%d", app, r.Uint32(), k), fmt.Sprintf("node-%d", r.IntN(nodes)), labels,
			fmt.Sprintf("10.%d.%d.%d", 1+k/65536, (k/256)%256, k%256))
		WithPorts(p, ContainerPort("http", 8080, ""), ContainerPort("metrics", 9090, ""), ContainerPort("grpc", int32(50051+r.IntN(3)), ""))
		s.Pods = append(s.Pods, p)
	}
	dns := PodsInNS(Labels{"role": "system"}, Labels{"k8s-app": "kube-dns"})
	for i := range policies {
		ns := nsName(2 + r.IntN(namespaces-2))
		name := fmt.Sprintf("np-%d", i)
		app, other := Labels{"app": apps[i%len(apps)]}, Labels{"app": apps[(i+1)%len(apps)]}
		var np *networkingv1.NetworkPolicy
		switch i % 20 {
		case 0, 1, 2, 3: // default deny ingress and egress, DNS allowed
			np = Policy(ns, name, nil, BothTypes, nil, To(Peers(dns), Port(corev1.ProtocolUDP, 53), Port("", 53)))
		case 4, 5, 6, 7, 8, 9: // same-namespace tiers
			np = Policy(ns, name, app, nil, From(Peers(PodsWith(other)), Port("", 8080), PortRange("", 8443, 8444)), nil)
		case 10, 11, 12: // the team's namespaces, by name
			np = Policy(ns, name, app, nil, From(Peers(PodsInNS(Labels{"team": fmt.Sprintf("t%d", i%50)}, nil)), NamedPort("", "http")), nil)
		case 13, 14: // monitoring scrapes
			np = Policy(ns, name, nil, IngressOnly, From(Peers(PodsInNS(Labels{"role": "monitoring"}, Labels{"app": "prometheus"})), NamedPort("", "metrics")), nil)
		case 15, 16: // the internet, not the VPC or IMDS
			np = Policy(ns, name, app, EgressOnly, nil, To(Peers(Block("0.0.0.0/0", "10.0.0.0/8", "169.254.169.254/32")), Port("", 443), Port("", 80)))
		case 17: // a load balancer's subnets, a NodePort-like range
			np = Policy(ns, name, app, IngressOnly, From(Peers(Block("10.200.0.0/16", "10.200.255.0/24"), Block("10.201.0.0/16")), PortRange("", 30000, 32767)), nil)
		case 18: // egress to production's grpc services, by name
			np = Policy(ns, name, app, EgressOnly, nil, To(Peers(PodsInNS(Labels{"env": "prod"}, Labels{"app": "api"})), NamedPort("", "grpc")))
		default: // ingress from the prod namespaces of the whole cluster
			np = Policy(ns, name, app, IngressOnly, From(Peers(NSWith(Labels{"env": "prod"}))), nil)
		}
		s.Policies = append(s.Policies, np)
	}
	return s
}

// NamespaceIndex is the index of a namespace NewCluster named.
func NamespaceIndex(name string) int {
	var team, i int
	if _, err := fmt.Sscanf(name, "team%d-app%d", &team, &i); err != nil {
		panic(err)
	}
	return i
}

// Feeder takes the cluster's objects: netpol's Compiler.
type Feeder interface {
	UpsertNamespace(*corev1.Namespace) []netip.Addr
	UpsertPod(*corev1.Pod) []netip.Addr
	UpsertPolicy(*networkingv1.NetworkPolicy) []netip.Addr
}

// FeedTo gives f every object of the cluster, namespaces first, as the agent's informers' initial lists.
func (s *Cluster) FeedTo(f Feeder) {
	for _, n := range s.Namespaces {
		f.UpsertNamespace(n)
	}
	for _, p := range s.Pods {
		f.UpsertPod(p)
	}
	for _, np := range s.Policies {
		f.UpsertPolicy(np)
	}
}
