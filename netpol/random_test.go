package netpol

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// cluster is the objects a test holds, as the API server would: what Compile is given.
type cluster struct {
	pods       map[string]*corev1.Pod
	namespaces map[string]*corev1.Namespace
	policies   map[string]*networkingv1.NetworkPolicy
}

func newCluster() *cluster {
	return &cluster{pods: map[string]*corev1.Pod{}, namespaces: map[string]*corev1.Namespace{}, policies: map[string]*networkingv1.NetworkPolicy{}}
}

func (cl *cluster) compile(node string) map[netip.Addr]dptypes.PodPolicy {
	return Compile(node, slices.Collect(maps.Values(cl.policies)), slices.Collect(maps.Values(cl.namespaces)), slices.Collect(maps.Values(cl.pods)))
}

// TestCompilerMatchesCompileAfterRandomEvents feeds random sequences of pod, namespace and policy events
// to a Compiler and checks, after each, that its state is what Compile makes of the same objects from
// scratch and that it reported exactly the addresses whose state changed. Some stretches of events come
// between Hold and Flush, and are checked at the Flush.
func TestCompilerMatchesCompileAfterRandomEvents(t *testing.T) {
	const node = "node-a"
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 24))
			cl := newCluster()
			c := NewCompiler(node)
			prev := map[netip.Addr]dptypes.PodPolicy{}
			holding, isolated := false, 0
			for step := range 400 {
				if !holding && r.IntN(20) == 0 {
					c.Hold()
					holding = true
				}
				what, changed := randomEvent(r, cl, c)
				if holding {
					if changed != nil {
						t.Fatalf("step %d (%s): reported %v during a Hold", step, what, changed)
					}
					if r.IntN(8) != 0 {
						continue
					}
					what, changed, holding = what+", then Flush", c.Flush(), false
				}
				want := cl.compile(node)
				if d := diffPolicies(c.Policies(), want); d != "" {
					t.Fatalf("step %d (%s): Compiler differs from Compile:\n%s", step, what, d)
				}
				if len(c.compiled) != len(c.selecting) {
					t.Fatalf("step %d (%s): %d pods compiled, %d pods on the node: a stale pod's state is kept", step, what, len(c.compiled), len(c.selecting))
				}
				var wantChanged []netip.Addr
				for a := range keysOfBoth(prev, want) {
					p, had := prev[a]
					q, has := want[a]
					if had != has || !equalPolicies(p, q) {
						wantChanged = append(wantChanged, a)
					}
				}
				slices.SortFunc(wantChanged, netip.Addr.Compare)
				if !slices.Equal(changed, wantChanged) {
					t.Fatalf("step %d (%s): reported changed %v, want %v", step, what, changed, wantChanged)
				}
				prev = want
				isolated += countIsolated(want)
			}
			if isolated == 0 {
				t.Fatalf("no pod of the node was ever isolated: the generator tests nothing")
			}
		})
	}
}

func countIsolated(ps map[netip.Addr]dptypes.PodPolicy) int {
	n := 0
	for _, p := range ps {
		if p.Isolated() {
			n++
		}
	}
	return n
}

func keysOfBoth[V any](a, b map[netip.Addr]V) map[netip.Addr]struct{} {
	ks := map[netip.Addr]struct{}{}
	for k := range a {
		ks[k] = struct{}{}
	}
	for k := range b {
		ks[k] = struct{}{}
	}
	return ks
}

func diffPolicies(got, want map[netip.Addr]dptypes.PodPolicy) string {
	var d string
	for a := range keysOfBoth(got, want) {
		g, okg := got[a]
		w, okw := want[a]
		if okg != okw || !equalPolicies(g, w) {
			d += fmt.Sprintf("%s: got %v %+v\n   want %v %+v\n", a, okg, g, okw, w)
		}
	}
	return d
}

var (
	randNamespaces = []string{"ns-a", "ns-b", "ns-c"}
	randPodNames   = []string{"web-7d9f-abcde", "web-7d9f-abcdf", "db-0", "db-1", "api"}
	randApps       = []string{"web", "db", "api"}
)

// randomEvent applies one random event to both the cluster and the Compiler.
func randomEvent(r *rand.Rand, cl *cluster, c *Compiler) (string, []netip.Addr) {
	ns := randNamespaces[r.IntN(len(randNamespaces))]
	switch k := r.IntN(10); {
	case k < 5:
		p := randomPod(r, ns)
		key := ns + "/" + p.Name
		if _, ok := cl.pods[key]; ok && r.IntN(3) == 0 {
			delete(cl.pods, key)
			return "delete pod " + key, c.DeletePod(ns, p.Name)
		}
		cl.pods[key] = p
		return "upsert pod " + key, c.UpsertPod(p)
	case k < 7:
		if _, ok := cl.namespaces[ns]; ok && r.IntN(3) == 0 {
			delete(cl.namespaces, ns)
			return "delete namespace " + ns, c.DeleteNamespace(ns)
		}
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: randomLabels(r, "team", "a", "b")}}
		cl.namespaces[ns] = n
		return "upsert namespace " + ns, c.UpsertNamespace(n)
	default:
		name := fmt.Sprintf("np-%d", r.IntN(3))
		key := ns + "/" + name
		if _, ok := cl.policies[key]; ok && r.IntN(3) == 0 {
			delete(cl.policies, key)
			return "delete policy " + key, c.DeletePolicy(ns, name)
		}
		np := randomPolicy(r, ns, name)
		cl.policies[key] = np
		return "upsert policy " + key, c.UpsertPolicy(np)
	}
}

func randomLabels(r *rand.Rand, key string, values ...string) map[string]string {
	if r.IntN(4) == 0 {
		return nil
	}
	return map[string]string{key: values[r.IntN(len(values))]}
}

func randomPod(r *rand.Rand, ns string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: randPodNames[r.IntN(len(randPodNames))],
			Labels: randomLabels(r, "app", randApps...), CreationTimestamp: metav1.Unix(int64(r.IntN(3)), 0)},
		Spec: corev1.PodSpec{NodeName: []string{"node-a", "node-a", "node-b"}[r.IntN(3)], HostNetwork: r.IntN(10) == 0},
	}
	// A small pool of addresses, so that two pods sometimes claim one (a stale pod and its successor).
	for range r.IntN(3) {
		if r.IntN(2) == 0 {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: fmt.Sprintf("10.0.%d.%d", r.IntN(2), 1+r.IntN(8))})
		} else {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: fmt.Sprintf("fd00::%x", 1+r.IntN(8))})
		}
	}
	if r.IntN(12) == 0 {
		p.Status.Phase = corev1.PodSucceeded
	}
	c := corev1.Container{Name: "main"}
	if r.IntN(2) == 0 {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "http", ContainerPort: int32(8080 + r.IntN(2))})
	}
	if r.IntN(3) == 0 {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP})
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

func randomSelector(r *rand.Rand, key string, values ...string) *metav1.LabelSelector {
	switch r.IntN(4) {
	case 0:
		return &metav1.LabelSelector{}
	case 1:
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: values[r.IntN(len(values))]}}
	case 2:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: values[:1]}}}
	default:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpExists}}}
	}
}

func randomPolicy(r *rand.Rand, ns, name string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	np.Spec.PodSelector = *randomSelector(r, "app", randApps...)
	np.Spec.PolicyTypes = [][]networkingv1.PolicyType{nil, {networkingv1.PolicyTypeIngress}, {networkingv1.PolicyTypeEgress},
		{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}[r.IntN(4)]
	for range r.IntN(3) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: randomPeers(r), Ports: randomPorts(r)})
	}
	for range r.IntN(3) {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: randomPeers(r), Ports: randomPorts(r)})
	}
	return np
}

func randomPeers(r *rand.Rand) []networkingv1.NetworkPolicyPeer {
	var ps []networkingv1.NetworkPolicyPeer
	for range r.IntN(3) {
		var p networkingv1.NetworkPolicyPeer
		switch r.IntN(4) {
		case 0:
			p.PodSelector = randomSelector(r, "app", randApps...)
		case 1:
			p.NamespaceSelector = randomSelector(r, "team", "a", "b")
		case 2:
			p.PodSelector = randomSelector(r, "app", randApps...)
			p.NamespaceSelector = randomSelector(r, "team", "a", "b")
		default:
			p.IPBlock = []*networkingv1.IPBlock{
				{CIDR: "10.0.0.0/16", Except: []string{"10.0.1.0/24"}},
				{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.4/30", "10.0.0.5/32"}},
				{CIDR: "0.0.0.0/0"},
				{CIDR: "fd00::/120", Except: []string{"fd00::4/126"}},
			}[r.IntN(4)]
		}
		ps = append(ps, p)
	}
	return ps
}

func randomPorts(r *rand.Rand) []networkingv1.NetworkPolicyPort {
	var ps []networkingv1.NetworkPolicyPort
	for range r.IntN(3) {
		var p networkingv1.NetworkPolicyPort
		switch r.IntN(5) {
		case 0:
			p.Port = ptr(intstr.FromInt32(80))
		case 1:
			p.Port, p.EndPort = ptr(intstr.FromInt32(8000)), ptr(int32(8080))
		case 2:
			p.Port = ptr(intstr.FromString("http"))
		case 3:
			p.Port, p.Protocol = ptr(intstr.FromString("dns")), ptr(corev1.ProtocolUDP)
		default:
			p.Protocol = ptr([]corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolSCTP}[r.IntN(2)])
		}
		ps = append(ps, p)
	}
	return ps
}

func ptr[T any](v T) *T { return &v }
