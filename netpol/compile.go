package netpol

import (
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Compile compiles every pod of node from scratch: for each of its pods with an address of its own, the
// PodPolicy keyed by each of the pod's addresses. It is the reference the Compiler is tested against, and
// a baseline of its benchmarks; the agent uses the Compiler.
func Compile(node string, policies []*networkingv1.NetworkPolicy, namespaces []*corev1.Namespace, pods []*corev1.Pod) map[netip.Addr]dptypes.PodPolicy {
	src := scan{nsLabels: map[string]labels.Set{}}
	for _, ns := range namespaces {
		src.nsLabels[ns.Name] = NamespaceLabels(ns.Name, ns.Labels)
	}
	for _, p := range pods {
		src.pods = append(src.pods, newPod(p))
	}
	pols := make([]*policy, 0, len(policies))
	for _, np := range policies {
		pols = append(pols, parsePolicy(np))
	}
	owners := map[netip.Addr]*pod{}
	for _, q := range src.pods {
		if !q.local(node) {
			continue
		}
		for _, a := range q.addrs {
			if o := owners[a]; o == nil || owns(q, o) {
				owners[a] = q
			}
		}
	}
	out := make(map[netip.Addr]dptypes.PodPolicy, len(owners))
	var s scratch
	for a, q := range owners {
		var selecting []*policy
		for _, p := range pols {
			if p.selects(q) {
				selecting = append(selecting, p)
			}
		}
		out[a] = podPolicy(q, selecting, src, &s)
	}
	return out
}

// scan is the peerSource of Compile: it looks at every pod for every question.
type scan struct {
	pods     []*pod
	nsLabels map[string]labels.Set
}

func (s scan) labelsOf(ns string) labels.Set {
	if l, ok := s.nsLabels[ns]; ok {
		return l
	}
	return NamespaceLabels(ns, nil)
}

func (s scan) members(pe *peer, f func(netip.Addr, *pod)) {
	for _, p := range s.pods {
		if pe.matches(p, s.labelsOf(p.key.namespace)) {
			for _, a := range p.addrs {
				f(a, p)
			}
		}
	}
}

func (s scan) named(n portName, f func(*pod)) {
	for _, p := range s.pods {
		if _, ok := p.resolve(n); ok && p.peer {
			f(p)
		}
	}
}

// NamespaceLabels are the labels a namespace selector sees: the Namespace's, with the name label the API
// server sets on every Namespace (also for a namespace whose object the compiler has not seen yet).
func NamespaceLabels(name string, l map[string]string) labels.Set {
	s := labels.Set(maps.Clone(l))
	if s == nil {
		s = labels.Set{}
	}
	s[corev1.LabelMetadataName] = name
	return s
}
