package cluster

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eniwire/eniwire/netpol"
)

// podKey names a pod: namespace and name.
type podKey struct{ namespace, name string }

// pod is what the compiler reads of a Pod.
type pod struct {
	key    podKey
	labels labels.Set
	// addrs are status.podIPs, sorted; none for a pod that ended or has none yet.
	addrs []netip.Addr
	// peer: the addresses are the pod's own (not the host's network): it can be a subject or a peer.
	peer  bool
	node  string
	ports []namedPort
}

// namedPort is a container port with a name.
type namedPort struct {
	name  string
	proto uint8
	port  uint16
}

func newPod(p *corev1.Pod) *pod {
	v := &pod{key: podKey{p.Namespace, p.Name}, labels: labels.Set(maps.Clone(p.Labels)), node: p.Spec.NodeName}
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		v.addrs = netpol.PodAddrs(p)
	}
	v.peer = len(v.addrs) > 0 && !p.Spec.HostNetwork
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			proto, ok := netpol.ProtocolNumber(cp.Protocol)
			if cp.Name != "" && ok && cp.ContainerPort >= 1 && cp.ContainerPort <= 65535 {
				v.ports = append(v.ports, namedPort{cp.Name, proto, uint16(cp.ContainerPort)})
			}
		}
	}
	return v
}

// resolveAny is every port the pod names name, whatever the protocol: a destinationNamedPort gives no
// protocol, the container port does.
func (p *pod) resolveAny(name string) []namedPort {
	var out []namedPort
	for _, np := range p.ports {
		if np.name == name {
			out = append(out, np)
		}
	}
	return out
}

func (p *pod) same(q *pod) bool {
	return p.node == q.node && p.peer == q.peer && slices.Equal(p.addrs, q.addrs) &&
		slices.Equal(p.ports, q.ports) && maps.Equal(p.labels, q.labels)
}

// node is what the compiler reads of a Node: its labels and the addresses of its status.
type node struct {
	name   string
	labels labels.Set
	addrs  []netip.Addr
}

func newNode(n *corev1.Node) *node {
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			ips = append(ips, a.Address)
		}
	}
	return &node{name: n.Name, labels: labels.Set(maps.Clone(n.Labels)), addrs: parseAddrs(ips)}
}

func (n *node) same(m *node) bool {
	return slices.Equal(n.addrs, m.addrs) && maps.Equal(n.labels, m.labels)
}

// parseAddrs parses addresses, unmapped, sorted, each once; what does not parse is left out.
func parseAddrs(ips []string) []netip.Addr {
	var addrs []netip.Addr
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a.Unmap().WithZone(""))
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
}
