// Package api holds the agent API: the types that travel between the CNI plugin and the node agent over
// the agent's unix socket, and the client the plugin uses. It is the only part of controller/ that cni/
// imports, so it depends on nothing else of eniwire.
package api

import "time"

// Version is the path prefix of every endpoint; a breaking change to the types gets a new one.
const Version = "v1"

// DefaultMTU is the pods' veth MTU unless the agent is configured otherwise (AWS_VPC_ENI_MTU's default: EC2's
// jumbo frames). The plugin creates a pair at it, so the usual answer changes nothing.
const DefaultMTU = 9001

// DefaultSocket is where the agent listens unless configured otherwise.
const DefaultSocket = "/run/eniwire/agent.sock"

// Endpoint paths, relative to the socket.
const (
	PathAssign      = "/" + Version + "/assign"
	PathRelease     = "/" + Version + "/release"
	PathCheck       = "/" + Version + "/check"
	PathAssignments = "/" + Version + "/assignments"
	PathStatus      = "/" + Version + "/status"
	PathGC          = "/" + Version + "/gc"
	// PathPolicy is GET ?pod=NAMESPACE/NAME[&explain=FLOW]: the pod's compiled NetworkPolicy (PolicyReport).
	PathPolicy = "/" + Version + "/policy"
)

// PodIdentity names the Kubernetes pod an assignment belongs to, as the runtime passes it in CNI_ARGS.
type PodIdentity struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	UID       string `json:"uid,omitempty"`
}

// Attachment is the key of an assignment: a container's interface, as CNI identifies it.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// AssignRequest asks the agent for an IP for one container interface. A repeated request for the same
// attachment returns the same assignment.
type AssignRequest struct {
	Attachment
	// Network is the name of the CNI network (the conflist's name) the attachment belongs to; GC of one
	// network touches only its own assignments.
	Network     string      `json:"network,omitempty"`
	Netns       string      `json:"netns"`
	Pod         PodIdentity `json:"pod"`
	HostVeth    string      `json:"hostVeth"`
	HostIfindex int         `json:"hostIfindex"`
}

// Assignment is an IP given to a container interface, as the agent persisted it before answering.
type Assignment struct {
	// Network is the CNI network of the attachment (AssignRequest.Network).
	Network string `json:"network,omitempty"`
	Attachment
	Netns       string      `json:"netns"`
	Pod         PodIdentity `json:"pod"`
	HostVeth    string      `json:"hostVeth"`
	HostIfindex int         `json:"hostIfindex"`
	// IP is the pod's address: a secondary private IPv4 of ENI, or in IPv6 mode an address of its /80.
	IP string `json:"ip"`
	// EgressIP is, in IPv6 mode, the pod's node-local IPv4 address (169.254.172.0/22) for reaching IPv4
	// destinations, which the node translates to its primary IPv4; empty for IPv4 pods.
	EgressIP string `json:"egressIP,omitempty"`
	// IPv6 is, in dual-stack mode, the pod's address of IPv6ENI's /80 beside its IPv4 in IP; empty otherwise.
	// IPv6ENI is the ENI holding the /80 (the primary) and IPv6ENIMAC its MAC.
	IPv6       string `json:"ipv6,omitempty"`
	IPv6ENI    string `json:"ipv6ENI,omitempty"`
	IPv6ENIMAC string `json:"ipv6ENIMAC,omitempty"`
	// ENI is the id of the ENI that owns IP; ENIMAC its MAC and DeviceIndex its attachment's device index.
	ENI         string `json:"eni"`
	ENIMAC      string `json:"eniMAC"`
	DeviceIndex int    `json:"deviceIndex"`
	// SubnetCIDR is the ENI's subnet and Gateway its router (the subnet's first host address).
	SubnetCIDR string    `json:"subnetCIDR"`
	Gateway    string    `json:"gateway"`
	AssignedAt time.Time `json:"assignedAt"`
	// MTU is what the plugin sets on both ends of the pod's veth: the agent's AWS_VPC_ENI_MTU, or the
	// primary ENI's MTU when that is smaller. The agent is its one source (no conflist carries it); 0, from
	// an agent that predates the field, leaves the kernel's veth default (1500).
	MTU int `json:"mtu,omitempty"`
	// SecurityGroupSet is the pod's security-group set when SecurityGroupPolicies gave it one (its ENI's
	// groups, the sorted ids joined by commas); StrictSecurityGroups says its packets all take the VPC's way
	// (POD_SECURITY_GROUP_ENFORCING_MODE=strict: no same-node shortcut, no SNAT).
	SecurityGroupSet     string `json:"securityGroupSet,omitempty"`
	StrictSecurityGroups bool   `json:"strictSecurityGroups,omitempty"`
}

// ReleaseRequest gives an attachment's IP back. Releasing an unknown attachment succeeds with Released false.
type ReleaseRequest struct {
	Attachment
	// Unused says that the caller's ADD failed before the pod could use the IP (the runtime starts no
	// container before ADD succeeds): the IP goes back to the pool without cooldown.
	Unused bool `json:"unused,omitempty"`
}

// ReleaseResponse says whether the agent held an assignment for the attachment, and which.
type ReleaseResponse struct {
	Released   bool        `json:"released"`
	Assignment *Assignment `json:"assignment,omitempty"`
	// HostVethRemoval says who removes the assignment's host veth: HostVethRemovalAgent when the agent has
	// taken it on (it deletes the veth in the background, which takes the pod's end with it), empty when the
	// caller must. Deleting a veth waits on an RCU barrier in the kernel (tens of milliseconds), so the plugin
	// leaves it to the agent rather than hold the runtime's DEL on it.
	HostVethRemoval string `json:"hostVethRemoval,omitempty"`
}

// HostVethRemovalAgent is ReleaseResponse.HostVethRemoval when the agent removes the host veth.
const HostVethRemovalAgent = "agent"

// CheckRequest asks for the agent's record of one attachment.
type CheckRequest struct {
	Attachment
}

// GCRequest lists the attachments the runtime still knows of one network; the agent releases every other
// assignment of that network and leaves the other networks' alone. Assignments made without a network name
// belong to the network "".
type GCRequest struct {
	Network string       `json:"network,omitempty"`
	Valid   []Attachment `json:"valid"`
}

// GCResponse lists what GC released.
type GCResponse struct {
	Released []Assignment `json:"released"`
}

// ENIStatus is one ENI as the agent's books hold it.
type ENIStatus struct {
	ID                  string `json:"id"`
	MAC                 string `json:"mac"`
	DeviceIndex         int    `json:"deviceIndex"`
	State               string `json:"state"`
	Primary             bool   `json:"primary"`
	DeleteOnTermination bool   `json:"deleteOnTermination"`
	SubnetID            string `json:"subnetID,omitempty"`
	SubnetCIDR          string `json:"subnetCIDR"`
	// IPs are the ENI's IPv4 slots for pods: secondary IPs, and /28 prefixes in CIDR notation.
	IPs []string `json:"ips"`
	IPCounts
	// Prefixes are the /28 prefixes among IPs, each with its own counts.
	Prefixes []PrefixStatus `json:"prefixes,omitempty"`
	// SecurityGroupSet, when set, makes the ENI the pool of that pod security-group set (its key: the
	// sorted group ids joined by commas); its warm IPs serve that set's pods alone.
	SecurityGroupSet string `json:"securityGroupSet,omitempty"`
}

// SecurityGroupSetStatus is what one pod security-group set holds (security groups for pods).
type SecurityGroupSetStatus struct {
	// Set is the key: the sorted group ids joined by commas.
	Set  string   `json:"set"`
	ENIs []string `json:"enis"`
	IPCounts
	// Waiting are the ADDs waiting for an address of the set; Blocked, why it cannot have one now.
	Waiting int    `json:"waiting,omitempty"`
	Blocked string `json:"blocked,omitempty"`
}

// IPCounts are how many pod IPs are assigned, warm (free and usable) and cooling down.
type IPCounts struct {
	Assigned int `json:"assigned"`
	Warm     int `json:"warm"`
	Cooldown int `json:"cooldown"`
}

// Add adds o's counts to c.
func (c *IPCounts) Add(o IPCounts) {
	c.Assigned, c.Warm, c.Cooldown = c.Assigned+o.Assigned, c.Warm+o.Warm, c.Cooldown+o.Cooldown
}

// PrefixStatus is one /28 prefix of an ENI: how many of its 16 IPs pods hold, are warm or cool down.
type PrefixStatus struct {
	CIDR string `json:"cidr"`
	IPCounts
}

// PendingOp is an ENI operation the journal holds that has not reached a resting state.
type PendingOp struct {
	OpID  string    `json:"opID"`
	ENI   string    `json:"eni,omitempty"`
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Error string    `json:"error,omitempty"`
}

// Status is the agent's view of the node: readiness, ENIs, IP counts and pending work.
type Status struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// Journal is Healthy while the journal takes writes, else the failure that stopped the node (Ready is false
	// too). Datapath is Healthy while the datapath can wire pods, else why it cannot (it brought none of the
	// node's ENIs up). An agent that predates them leaves both empty. Either one not Healthy, or Ready false,
	// means no ADD can work on the node; no free IP does not (a full node is healthy).
	Journal      string `json:"journal,omitempty"`
	Datapath     string `json:"datapath,omitempty"`
	InstanceID   string `json:"instanceID"`
	InstanceType string `json:"instanceType"`
	MaxENIs      int    `json:"maxENIs"`
	IPsPerENI    int    `json:"ipsPerENI"`
	// MaxPods is the most pods the node runs (kubelet's --max-pods for it); the pool holds no more IPs.
	MaxPods  int         `json:"maxPods"`
	ENIs     []ENIStatus `json:"enis"`
	Assigned int         `json:"assigned"`
	Warm     int         `json:"warm"`
	Cooldown int         `json:"cooldown"`
	// AddsWaiting are the ADDs waiting for an IP while the pool refills (ENIWIRE_ADD_WAIT), with those still
	// queued for the agent's state lock.
	AddsWaiting int         `json:"addsWaiting,omitempty"`
	Pending     []PendingOp `json:"pending"`
	// PoolStatus is the pool manager's last word, e.g. "subnet exhausted, backing off until ...".
	PoolStatus string `json:"poolStatus,omitempty"`
	// PoolReason names what PoolStatus says in one word (Pool*), or is empty with it.
	PoolReason string `json:"poolReason,omitempty"`
	// PrefixDelegation says whether new room comes as /28 prefixes; PrefixFallback, while set, why it comes
	// as single IPs for now (a subnet with no free /28) and when prefixes are tried again.
	PrefixDelegation bool   `json:"prefixDelegation"`
	PrefixFallback   string `json:"prefixFallback,omitempty"`
	// Subnets are the candidate subnets for new ENIs, in the order they are taken (subnet discovery; the
	// node's own alone when it is off or custom networking is on).
	Subnets []SubnetStatus `json:"subnets,omitempty"`
	// CustomNetworking is its status line while it is on: the ENIConfig in force, ENIs of other subnets that
	// drain, and what stops new ENIs.
	CustomNetworking string `json:"customNetworking,omitempty"`
	// VPCCIDRs are the VPC's IPv4 blocks as the datapath and SNAT treat them (inside the VPC).
	VPCCIDRs []string `json:"vpcCIDRs,omitempty"`
	// NetworkPolicy is the enforcement's status line while it is on: the watch's state, the pods isolated,
	// and the pods whose policy could not be written (isolated, allowing nothing).
	NetworkPolicy string `json:"networkPolicy,omitempty"`
	// SecurityGroupSets are the pod security-group sets the node holds ENIs for or ADDs wait for, by key
	// (security groups for pods; Warm and Assigned above leave their addresses out).
	SecurityGroupSets []SecurityGroupSetStatus `json:"securityGroupSets,omitempty"`
	// PodSecurityGroups is the SecurityGroupPolicy watch's status line while security groups for pods are on.
	PodSecurityGroups string `json:"podSecurityGroups,omitempty"`
}

// Why the pool rests short of IPs or cannot grow, as Status.PoolReason: CamelCase, as a Kubernetes
// condition's reason (the node's eniwire.io/IPAMReady carries it).
const (
	PoolMaxPods         = "MaxPodsReached"  // the pods hold as many IPs as max pods allows
	PoolENILimit        = "ENILimitReached" // short of IPs, every ENI slot in use
	PoolSubnetExhausted = "SubnetExhausted" // the subnet has no free addresses
	PoolUnauthorized    = "EC2Unauthorized" // IAM denies the calls
	PoolNoSubnet        = "NoSubnetForENI"  // no subnet takes a new ENI (custom networking's ENIConfig)
	PoolNoDeviceIndex   = "NoDeviceIndex"   // no free device index for a new ENI
	PoolEC2Refusing     = "EC2Refusing"     // EC2 refuses a call for another reason a retry will not fix
	PoolENIClosed       = "ENIClosed"       // an ENI EC2 refuses new IPs for is closed to them
	PoolGrowthFailing   = "GrowthFailing"   // the last step of growth failed and is retried
)

// Healthy is Status.Journal and Status.Datapath when they work.
const Healthy = "ok"

// SubnetStatus is a candidate subnet for new ENIs.
type SubnetStatus struct {
	ID   string `json:"id"`
	CIDR string `json:"cidr"`
	// Free is AvailableIpAddressCount at the last read.
	Free int `json:"free"`
	// Refused: it refused a new ENI for want of addresses lately; the next candidate is used meanwhile.
	Refused bool `json:"refused,omitempty"`
}

// PolicyReport is a pod's NetworkPolicy as the agent compiled it and wrote it to the datapath
// (`eniwirectl policy POD`).
type PolicyReport struct {
	// Pod is namespace/name; Addresses its addresses (the same state at each).
	Pod       string   `json:"pod"`
	Addresses []string `json:"addresses"`
	// Policies are the policies that select the pod (namespace/name): those that isolate it.
	Policies        []string     `json:"policies"`
	IngressIsolated bool         `json:"ingressIsolated"`
	EgressIsolated  bool         `json:"egressIsolated"`
	Ingress         []PolicyPeer `json:"ingress"`
	Egress          []PolicyPeer `json:"egress"`
	// Failure is why the state could not be written (the pod allows nothing), or "".
	Failure string `json:"failure,omitempty"`
	// Explanation answers the request's explain flow, when it had one.
	Explanation *PolicyExplanation `json:"explanation,omitempty"`
}

// PolicyPeer is one prefix of peers and the ports a flow with them may use ("tcp/80", "udp/1000-2000",
// "sctp", "any": every protocol and port); none: an except's hole.
type PolicyPeer struct {
	Peer  string   `json:"peer"`
	Ports []string `json:"ports"`
}

// PolicyExplanation says whether a flow is allowed, which policies allow it, or why none does.
type PolicyExplanation struct {
	Flow    string `json:"flow"`
	Allowed bool   `json:"allowed"`
	// AllowedBy are the policies whose rules alone allow the flow (empty when the pod is not isolated in
	// the flow's direction).
	AllowedBy []string `json:"allowedBy,omitempty"`
	// Reason is one sentence for the operator.
	Reason string `json:"reason"`
	// Peer is the other end's side when the peer is a pod of this node: its own policy (its ingress for a
	// flow to it, its egress for one from it) must allow the flow too, and Allowed says whether both do.
	Peer *PeerExplanation `json:"peer,omitempty"`
}

// PeerExplanation is a peer pod's side of a flow: the pod (namespace/name) and its verdict on the reverse
// flow ("from POD" for its ingress, "to POD" for its egress).
type PeerExplanation struct {
	Pod string `json:"pod"`
	PolicyExplanation
}
