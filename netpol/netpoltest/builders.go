// Package netpoltest builds the Kubernetes objects the NetworkPolicy tests and benchmarks feed to
// netpol's Compiler and to the agent's watch: short builders of Pods, Namespaces and NetworkPolicies, and
// Cluster, a generated cluster of the size.
package netpoltest

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels is a label set.
type Labels = map[string]string

// Pod is a pod of namespace ns on node with labels and status.podIPs ips.
func Pod(ns, name, node string, labels Labels, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// WithPorts gives p a container declaring ports.
func WithPorts(p *corev1.Pod, ports ...corev1.ContainerPort) *corev1.Pod {
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Ports: ports})
	return p
}

// ContainerPort is a container's port, named or not.
func ContainerPort(name string, port int32, proto corev1.Protocol) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: proto}
}

// Namespace is a namespace with labels.
func Namespace(name string, labels Labels) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Policy is a policy of namespace ns selecting pods with labels sel (every pod when nil).
func Policy(ns, name string, sel Labels, types []networkingv1.PolicyType, in []networkingv1.NetworkPolicyIngressRule, eg []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: types, Ingress: in, Egress: eg},
	}
}

// Policy types.
var (
	IngressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	EgressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	BothTypes   = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

// From is one ingress rule.
func From(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
}

// To is one egress rule.
func To(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
}

// Peers lists a rule's peers.
func Peers(ps ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return ps }

// PodsWith selects the pods of the policy's namespace with labels l.
func PodsWith(l Labels) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: l}}
}

// NSWith selects every pod of the namespaces with labels l.
func NSWith(l Labels) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: l}}
}

// PodsInNS selects the pods with labels pods in the namespaces with labels ns.
func PodsInNS(ns, pods Labels) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: ns}, PodSelector: &metav1.LabelSelector{MatchLabels: pods}}
}

// Block is an ipBlock.
func Block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// Port is a port by number; proto "" leaves the protocol out (the API's default, TCP).
func Port(proto corev1.Protocol, p int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: ptr(intstr.FromInt32(p))}
}

// PortRange is a range of ports (port and endPort).
func PortRange(proto corev1.Protocol, first, last int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: ptr(intstr.FromInt32(first)), EndPort: ptr(last)}
}

// NamedPort is a port by name, resolved on the selected pods.
func NamedPort(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: ptr(intstr.FromString(name))}
}

// ProtoOnly is every port of a protocol.
func ProtoOnly(proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto)}
}

func protoPtr(proto corev1.Protocol) *corev1.Protocol {
	if proto == "" {
		return nil
	}
	return &proto
}

func ptr[T any](v T) *T { return &v }
