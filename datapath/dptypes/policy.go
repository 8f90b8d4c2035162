package dptypes

import (
	"context"
	"net/netip"
)

// PodPolicy is the NetworkPolicy state of one pod of this node as the datapath enforces it: what the agent
// compiled from the policies that select the pod, Namespaces and Pods. It is keyed by the pod's address,
// never by its name, and says nothing of policies: only which peers and ports may open a flow.
//
// A pod that no policy selects has the zero PodPolicy: not isolated, every flow allowed. Replies of an
// allowed flow are always allowed; so is the node's own traffic to the pod (kubelet's probes).
type PodPolicy struct {
	// IngressIsolated: a policy with policyTypes Ingress selects the pod; only Ingress's peers may open a
	// flow to it. EgressIsolated: the same for flows the pod opens, and Egress.
	IngressIsolated bool
	EgressIsolated  bool
	// Ingress and Egress are the peers allowed in each direction. A peer address takes the entry of the
	// longest prefix that contains it, and only that one: the compiler folds every rule that covers an
	// address into that entry, and an ipBlock's except is a longer prefix whose entry lacks that rule's
	// ports. Prefixes are unique within a direction; IPv4 peers are IPv4 prefixes (not IPv4-mapped).
	Ingress []PeerPorts
	Egress  []PeerPorts
}

// Isolated says whether the pod is isolated in either direction.
func (p PodPolicy) Isolated() bool { return p.IngressIsolated || p.EgressIsolated }

// PeerPorts is one prefix of peers and the ports a flow with them may use. Empty Ports allow nothing: the
// hole an except leaves inside a shorter prefix. A flow takes the most specific of Ports that holds it: a
// range of one protocol's ports before the protocol's every port, and that before AnyProtocol, so a Deny
// range carves its ports out of a wider allowed one (ClusterNetworkPolicy's verdicts, package
// netpol/tiers); NetworkPolicy alone never denies.
type PeerPorts struct {
	Peer  netip.Prefix
	Ports []PortRange
}

// PortRange is a protocol and a range of destination ports (the pod's port for ingress, the peer's for
// egress).
type PortRange struct {
	// Protocol is an IP protocol number (6 TCP, 17 UDP, 132 SCTP), or AnyProtocol: a rule without ports,
	// which allows every protocol and port, ICMP included.
	Protocol uint8
	// First and Last bound the ports, both included; AllPorts (0, 65535) when the rule names a protocol
	// only. Ignored for AnyProtocol.
	First, Last uint16
	// Deny says the range's flows are denied, not allowed: it takes effect inside a wider range that allows
	// them. Overlapping ranges of one PeerPorts must nest.
	Deny bool
}

// AnyProtocol is PortRange.Protocol for a rule without ports.
const AnyProtocol = 0

// AllPorts is every port of one protocol.
var AllPorts = [2]uint16{0, 65535}

// PolicyDriver is how the agent hands compiled NetworkPolicy state to a datapath. Its methods are
// idempotent. SetPodPolicy replaces the pod's state whole, atomically as far as packets can tell: no packet
// sees part of the old and part of the new rules. Before the first SetPodPolicy of a pod, and after
// ClearPodPolicy, the pod is not isolated.
type PolicyDriver interface {
	SetPodPolicy(ctx context.Context, pod netip.Addr, p PodPolicy) error
	ClearPodPolicy(ctx context.Context, pod netip.Addr) error
}
