package netpol

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// scale is a generated cluster of the size: its Namespaces, Pods (spread over nodes, ours among
// them) and NetworkPolicies, a realistic mix of default-deny, same-namespace pod selectors, namespace
// selectors, monitoring and DNS access, ipBlocks with except, ranges and ports by name.
type scale struct {
	namespaces []*corev1.Namespace
	pods       []*corev1.Pod
	policies   []*networkingv1.NetworkPolicy
}

const scaleNode = "node-0"

func newScale(namespaces, pods, policies, nodes int) *scale {
	r := rand.New(rand.NewPCG(1, 2))
	s := &scale{}
	nsName := func(i int) string { return fmt.Sprintf("team%d-app%d", i%50, i) }
	envs := []string{"prod", "staging", "dev"}
	for i := range namespaces {
		s.namespaces = append(s.namespaces, mkNS(nsName(i), lbl{"team": fmt.Sprintf("t%d", i%50), "env": envs[i%3], corev1.LabelMetadataName: nsName(i)}))
	}
	// Namespace 0 plays kube-system (kube-dns), namespace 1 monitoring (prometheus).
	s.namespaces[0].Labels["role"], s.namespaces[1].Labels["role"] = "system", "monitoring"
	apps := []string{"web", "api", "worker", "cache", "db"}
	for k := range pods {
		ns := k % namespaces
		app := apps[(k/namespaces)%len(apps)]
		labels := lbl{"app": app, "pod-template-hash": fmt.Sprintf("%x", r.Uint32()), "version": fmt.Sprintf("v%d", r.IntN(3))}
		switch ns {
		case 0:
			labels["k8s-app"] = "kube-dns"
		case 1:
			labels["app"] = "prometheus"
		}
		p := mkPod(nsName(ns), fmt.Sprintf("%s-%x-%d", app, r.Uint32(), k), fmt.Sprintf("node-%d", r.IntN(nodes)), labels,
			fmt.Sprintf("10.%d.%d.%d", 1+k/65536, (k/256)%256, k%256))
		withPorts(p, cport("http", 8080, ""), cport("metrics", 9090, ""), cport("grpc", int32(50051+r.IntN(3)), ""))
		s.pods = append(s.pods, p)
	}
	dns := podsInNS(lbl{"role": "system"}, lbl{"k8s-app": "kube-dns"})
	for i := range policies {
		ns := nsName(2 + r.IntN(namespaces-2))
		name := fmt.Sprintf("np-%d", i)
		app, other := lbl{"app": apps[i%len(apps)]}, lbl{"app": apps[(i+1)%len(apps)]}
		var np *networkingv1.NetworkPolicy
		switch i % 20 {
		case 0, 1, 2, 3: // default deny ingress and egress, DNS allowed
			np = mkPolicy(ns, name, nil, bothTypes, nil, to(peers(dns), port(corev1.ProtocolUDP, 53), port("", 53)))
		case 4, 5, 6, 7, 8, 9: // same-namespace tiers
			np = mkPolicy(ns, name, app, nil, from(peers(podsWith(other)), port("", 8080), portRangeOf("", 8443, 8444)), nil)
		case 10, 11, 12: // the team's namespaces, by name
			np = mkPolicy(ns, name, app, nil, from(peers(podsInNS(lbl{"team": fmt.Sprintf("t%d", i%50)}, nil)), namedPortOf("", "http")), nil)
		case 13, 14: // monitoring scrapes
			np = mkPolicy(ns, name, nil, ingressOnly, from(peers(podsInNS(lbl{"role": "monitoring"}, lbl{"app": "prometheus"})), namedPortOf("", "metrics")), nil)
		case 15, 16: // the internet, not the VPC or IMDS
			np = mkPolicy(ns, name, app, egressOnly, nil, to(peers(block("0.0.0.0/0", "10.0.0.0/8", "169.254.169.254/32")), port("", 443), port("", 80)))
		case 17: // a load balancer's subnets, a NodePort-like range
			np = mkPolicy(ns, name, app, ingressOnly, from(peers(block("10.200.0.0/16", "10.200.255.0/24"), block("10.201.0.0/16")), portRangeOf("", 30000, 32767)), nil)
		case 18: // egress to production's grpc services, by name
			np = mkPolicy(ns, name, app, egressOnly, nil, to(peers(podsInNS(lbl{"env": "prod"}, lbl{"app": "api"})), namedPortOf("", "grpc")))
		default: // ingress from the prod namespaces of the whole cluster
			np = mkPolicy(ns, name, app, ingressOnly, from(peers(nsWith(lbl{"env": "prod"}))), nil)
		}
		s.policies = append(s.policies, np)
	}
	return s
}

// nsIndex is the index of a namespace newScale named.
func nsIndex(name string) int {
	var team, i int
	if _, err := fmt.Sscanf(name, "team%d-app%d", &team, &i); err != nil {
		panic(err)
	}
	return i
}

// build feeds the whole cluster to a new Compiler, as the agent does its informers' initial lists.
func (s *scale) build(node string) *Compiler {
	c := NewCompiler(node)
	c.Hold()
	defer c.Flush()
	for _, n := range s.namespaces {
		c.UpsertNamespace(n)
	}
	for _, p := range s.pods {
		c.UpsertPod(p)
	}
	for _, np := range s.policies {
		c.UpsertPolicy(np)
	}
	return c
}
