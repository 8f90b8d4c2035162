package netpol

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podKey names a pod or a policy: namespace and name. Pods are told apart by their whole name, never a
// prefix of it (the AWS agent's state of pods whose names differ only after the last dash was shared).
type podKey struct{ namespace, name string }

// pod is what the compiler needs of a Pod.
type pod struct {
	key    podKey
	labels labels.Set
	// addrs are the pod's addresses (status.podIPs), sorted; empty when it has none (yet) or holds none
	// any more (a terminated pod).
	addrs []netip.Addr
	// peer: the pod's addresses are its own, so it is a peer that pod selectors match: it has addresses
	// and is not on the host's network.
	peer    bool
	node    string
	ports   []namedPort
	created time.Time
}

// namedPort is a container port with a name: what a policy's port by name resolves to.
type namedPort struct {
	name  string
	proto uint8
	port  uint16
}

// portName is a named port as a rule names it: the name and the rule's protocol.
type portName struct {
	name  string
	proto uint8
}

func newPod(p *corev1.Pod) *pod {
	v := &pod{
		key:     podKey{p.Namespace, p.Name},
		labels:  labels.Set(maps.Clone(p.Labels)),
		node:    p.Spec.NodeName,
		created: p.CreationTimestamp.Time,
	}
	terminated := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if !terminated {
		v.addrs = PodAddrs(p)
	}
	v.peer = len(v.addrs) > 0 && !p.Spec.HostNetwork
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			proto, ok := ProtocolNumber(cp.Protocol)
			if cp.Name == "" || !ok || cp.ContainerPort < 1 || cp.ContainerPort > 65535 {
				continue
			}
			v.ports = append(v.ports, namedPort{cp.Name, proto, uint16(cp.ContainerPort)})
		}
	}
	slices.SortFunc(v.ports, compareNamedPorts)
	v.ports = slices.Compact(v.ports)
	return v
}

func compareNamedPorts(a, b namedPort) int {
	if a.name != b.name {
		if a.name < b.name {
			return -1
		}
		return 1
	}
	if a.proto != b.proto {
		return int(a.proto) - int(b.proto)
	}
	return int(a.port) - int(b.port)
}

// PodAddrs parses status.podIPs (or status.podIP when podIPs is empty), both families, unmapped.
func PodAddrs(p *corev1.Pod) []netip.Addr {
	ips := make([]string, 0, len(p.Status.PodIPs))
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = append(ips, p.Status.PodIP)
	}
	var addrs []netip.Addr
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		addrs = append(addrs, a.Unmap().WithZone(""))
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
}

// local says whether the pod is one this node enforces policy for: on this node, with addresses of its
// own.
func (p *pod) local(node string) bool { return p.node == node && p.peer }

// resolve returns the port the pod names n, if it has one.
func (p *pod) resolve(n portName) (uint16, bool) {
	for _, np := range p.ports {
		if np.name == n.name && np.proto == n.proto {
			return np.port, true
		}
	}
	return 0, false
}

// sameAs says whether two versions of a pod compile alike.
func (p *pod) sameAs(q *pod) bool {
	return p.node == q.node && p.peer == q.peer && p.created.Equal(q.created) &&
		slices.Equal(p.addrs, q.addrs) && slices.Equal(p.ports, q.ports) && maps.Equal(p.labels, q.labels)
}

// sameAddrs says whether two versions of a pod are the same peer: the same addresses and ports.
func (p *pod) sameAddrs(q *pod) bool {
	return p.peer == q.peer && slices.Equal(p.addrs, q.addrs) && slices.Equal(p.ports, q.ports)
}

// owns says which of two local pods that claim one address the datapath state follows: the newer pod
// (the older one's claim is stale: its sandbox is gone and the address was handed out again), the
// greater name when they were created in the same second.
func owns(a, b *pod) bool {
	if !a.created.Equal(b.created) {
		return a.created.After(b.created)
	}
	if a.key.namespace != b.key.namespace {
		return a.key.namespace > b.key.namespace
	}
	return a.key.name > b.key.name
}
