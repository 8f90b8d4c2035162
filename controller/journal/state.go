package journal

import (
	"slices"
	"strings"
	"time"
)

// Version is the format this build writes: v2 journals hold delta records after a snapshot. A v1 journal (one
// whole state per line) is still read and rewritten as v2; any other version is refused, untouched.
const Version = 2

// ENIState is where an ENI stands in the commit (see docs/design.md, "The ENI commit").
type ENIState string

const (
	// Planned: decided to add an ENI; OpID and ClientToken are set, CreateNetworkInterface not yet answered.
	Planned ENIState = "planned"
	// Created: EC2 returned the ENI id; it is not attached yet.
	Created ENIState = "created"
	// Attached: EC2 returned an attachment id; DeleteOnTermination is not confirmed yet. The ENI is usable.
	Attached ENIState = "attached"
	// Ready: attached with DeleteOnTermination true.
	Ready ENIState = "ready"
	// Releasing: on its way out (detach, wait for available, delete); its IPs are no longer handed out.
	Releasing ENIState = "releasing"
	// Moved: EC2 shows it attached to another instance. Its IPs are no longer handed out; the record stays
	// while pods hold its IPs (their traffic is broken), and goes with the last of them.
	Moved ENIState = "moved"
)

// ReleaseStep is the step of a release that was journaled before its call.
type ReleaseStep string

const (
	StepDetach ReleaseStep = "detach"
	StepWait   ReleaseStep = "wait"
	StepDelete ReleaseStep = "delete"
)

// ENI is one ENI operation or ENI in the books.
type ENI struct {
	OpID        string   `json:"opID"`
	ClientToken string   `json:"clientToken,omitempty"`
	ID          string   `json:"id,omitempty"`
	MAC         string   `json:"mac,omitempty"`
	State       ENIState `json:"state"`
	Primary     bool     `json:"primary,omitempty"`
	// Adopted is set when the reconciler found the ENI attached with our tags but not in the books.
	Adopted    bool   `json:"adopted,omitempty"`
	SubnetID   string `json:"subnetID,omitempty"`
	SubnetCIDR string `json:"subnetCIDR,omitempty"`
	PrimaryIP  string `json:"primaryIP,omitempty"`
	// IPs are the IPv4 slots the books hold for pods: secondary private IPs and /28 prefixes (slots.go).
	IPs []string `json:"ips,omitempty"`
	// IPv6Prefixes are the IPv6 /80 prefixes the books hold for pods (ENABLE_IPv6: one, on the primary ENI).
	// Pods take single addresses of them; a /80 is never enumerated.
	IPv6Prefixes []string `json:"ipv6Prefixes,omitempty"`
	// WantIPs and WantPrefixes are how many secondary IPs and /28 prefixes the create asks for; part of the
	// idempotent request.
	WantIPs      int `json:"wantIPs,omitempty"`
	WantPrefixes int `json:"wantPrefixes,omitempty"`
	// SecurityGroups and Tags are the create's, as planned: a replay of its ClientToken sends them again,
	// whatever the agent's settings became since (EC2 answers a token reused with other parameters with
	// IdempotentParameterMismatch). Empty in records of older builds, whose create uses the settings.
	SecurityGroups []string `json:"securityGroups,omitempty"`
	Tags           []Tag    `json:"tags,omitempty"`
	// GroupSet, when set, makes the ENI the pool of one security-group set for pods (controller/sgpool): only
	// pods that SecurityGroupPolicies give exactly its groups take its addresses. It is the set's key, the
	// sorted group ids joined by commas, and is tagged on the ENI (eni.TagGroupSet) so an adopted ENI keeps it.
	GroupSet            string `json:"groupSet,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	DeviceIndex         int    `json:"deviceIndex"`
	DeleteOnTermination bool   `json:"deleteOnTermination,omitempty"`
	// AttachTried is set before AttachNetworkInterface is called: a resumed attach reads EC2 first.
	AttachTried bool        `json:"attachTried,omitempty"`
	ReleaseStep ReleaseStep `json:"releaseStep,omitempty"`
	CreatedAt   time.Time   `json:"createdAt"`
	Since       time.Time   `json:"since"`
	Attempts    int         `json:"attempts,omitempty"`
	LastError   string      `json:"lastError,omitempty"`
}

// Tag is one tag of a planned ENI.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Clone returns a copy of e that shares no slice with it.
func (e ENI) Clone() ENI {
	e.IPs = slices.Clone(e.IPs)
	e.IPv6Prefixes = slices.Clone(e.IPv6Prefixes)
	e.SecurityGroups = slices.Clone(e.SecurityGroups)
	e.Tags = slices.Clone(e.Tags)
	return e
}

// Usable reports whether the ENI's IPs may be handed to pods: attached, whether or not DeleteOnTermination
// holds yet.
func (e *ENI) Usable() bool { return e.State == Attached || e.State == Ready }

// Pending reports whether the ENI is planned or created, not attached yet: a slot taken, no address usable.
func (e *ENI) Pending() bool { return e.State == Planned || e.State == Created }

// PendingAddrs is how many addresses a pending ENI brings once attached: what its create asks for, or
// what it holds if that is more.
func (e *ENI) PendingAddrs() int { return max(e.WantIPs+e.WantPrefixes*PrefixAddrs, len(e.Addrs())) }

// IPOpKind says what an IPOp changes.
type IPOpKind string

const (
	AssignIPs   IPOpKind = "assign"
	UnassignIPs IPOpKind = "unassign"
)

// IPOp is a change of an ENI's slots journaled before its EC2 call: an assign of Count secondary IPs, of
// Count /28 prefixes when Prefixes, or of Count IPv6 /80 prefixes when IPv6 (AssignIpv6Addresses); an
// unassign of the IPv4 slots in IPs (addresses and prefixes), or of the /80s in IPs when IPv6
// (UnassignIpv6Addresses).
type IPOp struct {
	OpID     string   `json:"opID"`
	Kind     IPOpKind `json:"kind"`
	ENI      string   `json:"eni"`
	Count    int      `json:"count,omitempty"`
	Prefixes bool     `json:"prefixes,omitempty"`
	// IPv6: an op on /80s, which bring no IPv4 address.
	IPv6  bool      `json:"ipv6,omitempty"`
	IPs   []string  `json:"ips,omitempty"`
	Since time.Time `json:"since"`
}

// Addrs is how many IPv4 addresses an assign brings: Count, times PrefixAddrs for prefixes; none for /80s.
func (op IPOp) Addrs() int {
	if op.IPv6 {
		return 0
	}
	if op.Prefixes {
		return op.Count * PrefixAddrs
	}
	return op.Count
}

// Assignment is an IP given to a container interface.
type Assignment struct {
	ContainerID  string `json:"containerID"`
	IfName       string `json:"ifName"`
	Network      string `json:"network,omitempty"`
	Netns        string `json:"netns,omitempty"`
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
	HostVeth     string `json:"hostVeth,omitempty"`
	HostIfindex  int    `json:"hostIfindex,omitempty"`
	IP           string `json:"ip"`
	// EgressIP is the node-local IPv4 address an IPv6 pod sends IPv4 from (ENABLE_IPv6; empty otherwise),
	// journaled with the assignment so that no two pods ever hold it, across restarts too.
	EgressIP string `json:"egressIP,omitempty"`
	// IPv6 is a dual-stack pod's address of the primary ENI's /80, beside its IPv4 in IP (Config.DualStack;
	// empty otherwise): one record holds both, so a crash never leaves a pod with one of them.
	IPv6       string    `json:"ipv6,omitempty"`
	ENI        string    `json:"eni"`
	AssignedAt time.Time `json:"assignedAt"`
}

// Cooldown keeps a released IP out of use until Until, so conntrack entries of its last pod expire first.
type Cooldown struct {
	IP    string    `json:"ip"`
	ENI   string    `json:"eni"`
	Until time.Time `json:"until"`
}

// Unassigned is a secondary IP our own unassign took from an ENI, remembered for as long as a Describe may
// still list it there (EC2's eventual consistency), so that a listing that lags, even one read by a new
// process after a restart, does not put it back in the pool.
type Unassigned struct {
	IP  string    `json:"ip"`
	ENI string    `json:"eni"`
	At  time.Time `json:"at"`
}

// State is everything the journal holds.
type State struct {
	Version     int          `json:"version"`
	InstanceID  string       `json:"instanceID,omitempty"`
	Seq         uint64       `json:"seq"`
	ENIs        []ENI        `json:"enis"`
	IPOps       []IPOp       `json:"ipOps,omitempty"`
	Assignments []Assignment `json:"assignments"`
	Cooldowns   []Cooldown   `json:"cooldowns,omitempty"`
	Unassigned  []Unassigned `json:"unassigned,omitempty"`
}

// ENIByOp returns the ENI record of an operation, or nil.
func (s *State) ENIByOp(opID string) *ENI {
	for i := range s.ENIs {
		if s.ENIs[i].OpID == opID {
			return &s.ENIs[i]
		}
	}
	return nil
}

// ENIByID returns the ENI record with that EC2 id, or nil.
func (s *State) ENIByID(id string) *ENI {
	if id == "" {
		return nil
	}
	for i := range s.ENIs {
		if s.ENIs[i].ID == id {
			return &s.ENIs[i]
		}
	}
	return nil
}

// RemoveENI drops the record of an operation.
func (s *State) RemoveENI(opID string) {
	s.ENIs = slices.DeleteFunc(s.ENIs, func(e ENI) bool { return e.OpID == opID })
}

// Assignment returns the assignment of a container interface, or nil.
func (s *State) Assignment(containerID, ifName string) *Assignment {
	for i := range s.Assignments {
		if s.Assignments[i].ContainerID == containerID && s.Assignments[i].IfName == ifName {
			return &s.Assignments[i]
		}
	}
	return nil
}

// Clone returns a deep copy, so readers outside the lock never share slices with the writer.
func (s *State) Clone() *State {
	c := *s
	c.ENIs = make([]ENI, len(s.ENIs))
	for i, e := range s.ENIs {
		c.ENIs[i] = e.Clone()
	}
	c.IPOps = make([]IPOp, len(s.IPOps))
	for i, op := range s.IPOps {
		op.IPs = slices.Clone(op.IPs)
		c.IPOps[i] = op
	}
	c.Assignments = slices.Clone(s.Assignments)
	c.Cooldowns = slices.Clone(s.Cooldowns)
	c.Unassigned = slices.Clone(s.Unassigned)
	return &c
}

// GroupSetKey names a security-group set (ENI.GroupSet): its group ids sorted, without repeats or empty
// ids, joined by commas. Two pods whose policies name the same groups in any order are of one set.
func GroupSetKey(groups []string) string {
	out := slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return g == "" })
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// ServesSet reports whether pods of set may take the ENI's addresses: it is usable, of that set ("" the
// default pool), and for a set its groups are the set's (an adopted ENI whose groups someone changed is not).
func (e *ENI) ServesSet(set string) bool {
	return e.Usable() && e.GroupSet == set && (set == "" || GroupSetKey(e.SecurityGroups) == set)
}
