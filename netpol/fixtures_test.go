package netpol

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// The tests' node, and builders that keep their tables short.
const here = "node-a"

type lbl = map[string]string

type (
	networkingPort   = networkingv1.NetworkPolicyPort
	networkingPolicy = networkingv1.NetworkPolicy
)

func mkPod(ns, name, node string, labels lbl, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func withPorts(p *corev1.Pod, ports ...corev1.ContainerPort) *corev1.Pod {
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Ports: ports})
	return p
}

func cport(name string, port int32, proto corev1.Protocol) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: proto}
}

func mkNS(name string, labels lbl) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// mkPolicy builds a policy of namespace ns selecting pods with labels sel (every pod when nil).
func mkPolicy(ns, name string, sel lbl, types []networkingv1.PolicyType, in []networkingv1.NetworkPolicyIngressRule, eg []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: types, Ingress: in, Egress: eg},
	}
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	bothTypes   = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

func from(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
}

func to(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
}

func peers(ps ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return ps }

func podsWith(l lbl) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: l}}
}

func nsWith(l lbl) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: l}}
}

func podsInNS(ns, pods lbl) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: ns}, PodSelector: &metav1.LabelSelector{MatchLabels: pods}}
}

func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func port(proto corev1.Protocol, p int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: ptr(intstr.FromInt32(p))}
}

func portRangeOf(proto corev1.Protocol, first, last int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: ptr(intstr.FromInt32(first)), EndPort: ptr(last)}
}

func namedPortOf(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto), Port: ptr(intstr.FromString(name))}
}

func protoOnly(proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoPtr(proto)}
}

// protoPtr leaves the protocol out when proto is empty (the API's default, TCP).
func protoPtr(proto corev1.Protocol) *corev1.Protocol {
	if proto == "" {
		return nil
	}
	return &proto
}

// Expected entries.
func entry(prefix string, ports ...dptypes.PortRange) dptypes.PeerPorts {
	return dptypes.PeerPorts{Peer: netip.MustParsePrefix(prefix), Ports: ports}
}

func tcp(first, last uint16) dptypes.PortRange  { return portRange(6, first, last) }
func udp(first, last uint16) dptypes.PortRange  { return portRange(17, first, last) }
func sctp(first, last uint16) dptypes.PortRange { return portRange(132, first, last) }

var anyProto = anyPorts[0]

func entries(es ...dptypes.PeerPorts) []dptypes.PeerPorts { return es }
