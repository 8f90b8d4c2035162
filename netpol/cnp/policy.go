package cnp

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Resource is what the agent watches: v1beta1 is the storage version, and v1alpha2, served beside it with
// the same schema, reaches a watch of v1beta1 converted to it. Parse reads both.
var Resource = schema.GroupVersionResource{Group: "policy.networking.k8s.io", Version: "v1beta1", Resource: "clusternetworkpolicies"}

// Policy is one ClusterNetworkPolicy as Parse reads it: every selector built, every port and prefix checked.
// A Policy that Parse returns applies whole; one it refuses is not returned at all.
type Policy struct {
	Name string
	Tier Tier
	// Priority orders the policies of a tier, lower first (0..1000); rules keep their order within one.
	Priority int32
	Subject  PodSelection
	Ingress  []Rule
	Egress   []Rule
	// Warnings say what of the policy eniwire applies otherwise than it is written (fail closed), one
	// sentence each naming the policy and the field, for the agent to log.
	Warnings []string
}

// Tier is the group of policies a policy belongs to: Admin before NetworkPolicy, Baseline after.
type Tier string

const (
	Admin    Tier = "Admin"
	Baseline Tier = "Baseline"
)

// Action is what a rule does with the traffic it matches.
type Action string

const (
	// Accept allows the traffic, and no further ClusterNetworkPolicy or NetworkPolicy rule of the direction
	// is asked (for egress, the destination's ingress rules still are).
	Accept Action = "Accept"
	// Deny drops the traffic; nothing further is asked.
	Deny Action = "Deny"
	// Pass skips the remaining rules of the tier and asks the next tier.
	Pass Action = "Pass"
)

// PodSelection is the pods that Pods matches in the namespaces that Namespaces matches. A namespaces
// subject or peer is every pod of its namespaces: Pods is labels.Everything(), so that both forms are
// asked the same way. An empty selector ({}), and a pods form's omitted namespaceSelector, match all.
type PodSelection struct {
	Namespaces labels.Selector
	Pods       labels.Selector
}

// Rule is one ingress or egress rule, in the order the policy lists it (the first that matches decides).
type Rule struct {
	Name   string
	Action Action
	// Peers are the sources (ingress) or destinations (egress) the rule matches: any one of them.
	Peers []Peer
	// Ports are the destination ports the rule matches, any one of them; nil matches every protocol and
	// port, ICMP included (the rule gives no protocols).
	Ports []Port
	// FailClosed says that a peer of the rule has no field eniwire knows: a field of a newer CRD, or
	// domainNames, which eniwire does not implement. The API asks an implementation to fail closed then, so
	// the rule does not do what Action, Peers and Ports say: see MatchesNothing and DeniesAll. Peers holds
	// the peers that were understood, for reporting; Policy.Warnings says which peer it was.
	FailClosed bool
}

// MatchesNothing says that the rule, an Accept rule that fails closed, matches no traffic at all: its
// other peers included, as the API asks, since an allow list read in part could allow what it did not mean.
func (r Rule) MatchesNothing() bool { return r.FailClosed && r.Action == Accept }

// DeniesAll says that the rule, a Deny or Pass rule that fails closed, denies every flow of its direction
// in place of what it says: any peer, any protocol and port, and a Pass rule passes nothing on.
func (r Rule) DeniesAll() bool { return r.FailClosed && r.Action != Accept }

// PeerKind is the field of the API a peer was given by, with the API's name.
type PeerKind string

const (
	PeerNamespaces PeerKind = "namespaces"
	PeerPods       PeerKind = "pods"
	PeerNodes      PeerKind = "nodes" // egress only; the API's experimental ClusterNetworkPolicyEgressNodePeers
	PeerNetworks   PeerKind = "networks"
)

// Peer is one entry of a rule's from or to: exactly one of the API's peer fields, so Kind says which of
// PodSelection, Nodes or Networks is set.
type Peer struct {
	Kind PeerKind
	// PodSelection is the pods of a namespaces or pods peer; host-network pods are never among them.
	PodSelection
	// Nodes matches nodes by their labels; the peer is the addresses of their status.addresses.
	Nodes labels.Selector
	// Networks are prefixes, IPv4 and IPv6 (never IPv4-mapped), masked, without duplicates, in the order
	// given.
	Networks []netip.Prefix
}

// Port is one entry of a rule's protocols: a protocol and a destination port or range, or a port by name.
type Port struct {
	// PortRange is the protocol (6 TCP, 17 UDP, 132 SCTP) and the ports, both included: First equals Last
	// for a single port, and First is below Last for a range (the API refuses a range of one port). Zero for
	// a named port.
	dptypes.PortRange
	// Name is a destination port by its container port's name, resolved on each destination pod: for
	// ingress the subject pod, for egress each pod peer; the container port gives the protocol too. A pod
	// without a port of that name is matched by no port of this entry. The API's experimental
	// ClusterNetworkPolicyNamedPorts.
	Name string
}

// Named says whether the port is given by name, to be resolved per pod.
func (p Port) Named() bool { return p.Name != "" }
