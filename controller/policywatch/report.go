package policywatch

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol"
)

// PolicyReport implements the agent API's policy endpoint: the compiled state of the node's pod pod
// (namespace/name) and, when flow is not "", which policies allow it or why none does (explain.go). An
// unknown pod is an api.Error with CodeNotFound, a flow that does not parse one with CodeBadRequest.
func (w *Watcher) PolicyReport(_ context.Context, pod, flow string) (*api.PolicyReport, error) {
	var f flowSpec
	if flow != "" {
		var err error
		if f, err = parseFlow(flow); err != nil {
			return nil, &api.Error{Code: api.CodeBadRequest, Message: err.Error()}
		}
	}
	ns, name, _ := strings.Cut(pod, "/")
	w.mu.Lock()
	defer w.mu.Unlock()
	k := podKey{ns, name}
	p, ok := w.local[k]
	if !ok {
		return nil, &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no pod %s on node %s in the watch", pod, w.cfg.NodeName)}
	}
	out := &api.PolicyReport{Pod: pod, Addresses: []string{}, Policies: []string{}, Ingress: []api.PolicyPeer{}, Egress: []api.PolicyPeer{}}
	addrs := addrsOf(w.withAssigned(k, p))
	for _, a := range addrs {
		out.Addresses = append(out.Addresses, a.String())
	}
	if len(addrs) == 0 {
		return out, nil
	}
	a := addrs[0]
	pp, _ := w.compiler.Policy(a)
	out.Policies = append(out.Policies, w.compiler.Selecting(a)...)
	out.IngressIsolated, out.EgressIsolated = pp.IngressIsolated, pp.EgressIsolated
	out.Ingress, out.Egress = peersOf(pp.Ingress), peersOf(pp.Egress)
	if f, failed := w.failed[a]; failed {
		out.Failure = f.err.Error()
	}
	if flow != "" {
		out.Explanation = w.explain(f, flow, a, pp, out.Policies, out.Failure)
		w.explainPeer(out.Explanation, f, addrs)
	}
	return out, nil
}

func peersOf(entries []dptypes.PeerPorts) []api.PolicyPeer {
	out := make([]api.PolicyPeer, 0, len(entries))
	for _, e := range entries {
		ports := make([]string, 0, len(e.Ports))
		for _, r := range e.Ports {
			ports = append(ports, portString(r))
		}
		out = append(out, api.PolicyPeer{Peer: e.Peer.String(), Ports: ports})
	}
	return out
}

// alone compiles the node's pods under the policy named name alone (namespace/name), over the Pods and
// Namespaces the watch holds: what that policy's rules allow by themselves. mu held.
func (w *Watcher) alone(name string) map[netip.Addr]dptypes.PodPolicy {
	ns, n, _ := strings.Cut(name, "/")
	np, err := w.factory.Networking().V1().NetworkPolicies().Lister().NetworkPolicies(ns).Get(n)
	if err != nil {
		return nil
	}
	namespaces, _ := w.factory.Core().V1().Namespaces().Lister().List(labels.Everything())
	pods, _ := w.factory.Core().V1().Pods().Lister().List(labels.Everything())
	for i, p := range pods {
		pods[i] = w.withAssigned(podKey{p.Namespace, p.Name}, p)
	}
	return netpol.Compile(w.cfg.NodeName, []*networkingv1.NetworkPolicy{np}, namespaces, pods)
}

// addrsOf are a pod's addresses as status.podIPs gives them (status.podIP for an older API server).
func addrsOf(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a)
		}
	}
	return out
}
