package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/clock"
)

// Config is a node controller's settings. Zero values take the documented defaults.
type Config struct {
	// StateDir holds the journal (default /var/lib/eniwire).
	StateDir string
	// Cluster is written on every ENI as a tag (CLUSTER_NAME).
	Cluster string
	// WarmENITarget, WarmIPTarget, MinimumIPTarget, MaxENI, MaxPods: the AWS VPC CNI's settings, same meaning.
	WarmENITarget   int
	WarmIPTarget    int
	MinimumIPTarget int
	MaxENI          int
	MaxPods         int
	// EnablePrefixDelegation (ENABLE_PREFIX_DELEGATION): new room comes as /28 prefixes, 16 pod IPs per IPv4
	// slot of an ENI, on Nitro types (a Xen type keeps secondary IPs, with a warning). WarmPrefixTarget
	// (WARM_PREFIX_TARGET) keeps that many prefixes' worth of free IPs; WARM_IP_TARGET and MINIMUM_IP_TARGET
	// override it and count IPs, rounded up to whole prefixes; WARM_ENI_TARGET applies only when all three are
	// 0. When a fragmented subnet refuses prefixes the node grows with single IPs for a while
	// (prefixfallback.go). Default (all unset): WarmPrefixTarget 1, not the AWS VPC CNI's whole ENI of prefixes.
	EnablePrefixDelegation bool
	WarmPrefixTarget       int
	// Cooldown keeps a released IP out of use (default 120 s, the conntrack SYN_SENT timeout).
	Cooldown time.Duration
	// ReconcileInterval between reconciles (default 60 s, jittered by 10%) after one that found something to
	// set right; see MaxReconcileInterval.
	ReconcileInterval time.Duration
	// MaxReconcileInterval caps the stretch of the periodic reconcile (default 10 min): the interval doubles
	// after each reconcile that saw EC2 throttle the node's DescribeNetworkInterfaces or found the books and
	// EC2 agreeing, and is back to ReconcileInterval after one that found something to set right. Reconciles
	// asked for by a surprising EC2 answer are never postponed.
	MaxReconcileInterval time.Duration
	// AddWait bounds how long an ADD that finds the warm pool empty waits for the IPs the pool manager is
	// bringing (ENIWIRE_ADD_WAIT, default DefaultAddWait); negative: it is answered "no IP" at once. An ADD the
	// node cannot serve soon (max pods, the ENI limit, a full subnet, EC2 refusing) is answered at once.
	AddWait time.Duration
	// PoolInterval between pool checks when nothing wakes the manager (default 5 s).
	PoolInterval time.Duration
	// ReleaseDelay is the hysteresis: surplus must persist this long before it is released (default 60 s).
	ReleaseDelay time.Duration
	// GCGrace: our available ENIs younger than this are not collected (default 5 min).
	GCGrace time.Duration
	// OrphanSweepInterval is the mean time between two sweeps of this node for the cluster's orphaned ENIs
	// (available, with the cluster tag, owner instance terminated; see eni.SweepOrphans); default 5 min,
	// jittered over 0.5 to 1.5 of it, the first one too. Every node sweeps, so a cluster of N nodes
	// sweeps every interval/N on average, and a node's interval doubles after a sweep that collects nothing, up
	// to 6 times it, and is back after one that collects an orphan: a cluster whose nodes find nothing sweeps
	// every 30 min / N (1,000 nodes: one filtered DescribeNetworkInterfaces every 1.8 s, 0.56 calls/s of the
	// account's 20/s non-mutating refill). A sweep due while the node's own pods wait for IPs waits until they
	// have them. Negative turns the sweep off.
	OrphanSweepInterval time.Duration
	// StartJitter: the first EC2 work waits a random part of this, so a rollout does not arrive at once.
	StartJitter time.Duration
	// JournalSync is when pod assignments and releases reach the disk (ENIWIRE_JOURNAL_SYNC; see package
	// journal). ENI and IP operations are fsync'd before their EC2 call under either policy.
	JournalSync journal.SyncPolicy
	// VanishedPodGrace: an assignment whose network namespace has been gone this long (the pod went without a
	// DEL: a node reboot, a runtime that lost its state) is released (default 2 min). It is checked four times
	// per grace period; only namespaces whose directory the agent sees are judged. Negative turns it off.
	VanishedPodGrace time.Duration
	// JournalBatchInterval bounds the fdatasync delay of a pod record under SyncBatched (default 10 ms).
	JournalBatchInterval time.Duration
	// PodMTU is the MTU every assignment answer carries for the pod's veth (api.Assignment.MTU): the node's
	// setting when answered, not journaled. 0 leaves the plugin to the kernel's default.
	PodMTU int
	// DisableSubnetDiscovery is ENABLE_SUBNET_DISCOVERY=false: new ENIs go to the node's own subnet only.
	// With discovery (the default) they go to the subnet of the node's VPC and zone with the most free
	// addresses among the node's own and those tagged kubernetes.io/role/cni=1 (package subnet).
	DisableSubnetDiscovery bool
	// CustomNetworking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): new ENIs go to the subnet of the node's ENIConfig
	// (Deps.ENIConfigs) with its security groups, and the primary ENI carries no pods (package subnet).
	CustomNetworking bool
	// EnableIPv6 (ENABLE_IPv6) is the AWS VPC CNI's IPv6 mode: pods get IPv6 addresses of one /80 the node
	// takes on its primary ENI (one AssignIpv6Addresses with Ipv6PrefixCount=1, through the journaled assign),
	// handed out with the cooldown, each with a node-local IPv4 egress address (egress.go); no secondary ENI,
	// no warm target, no VPC IPv4 pod address. It needs a Nitro type and the primary ENI's subnet to hold an
	// IPv6 /64; New refuses it with CustomNetworking (ipv6mode.go).
	EnableIPv6 bool
	// DualStack (ENABLE_IPv6=true with ENABLE_IPv4=true) gives each pod an IPv4 of the warm pool, as without
	// EnableIPv6 (secondary IPs or /28 prefixes, warm targets, secondary ENIs), and an IPv6 of one /80 the node
	// takes on its primary ENI as in IPv6 mode, both in one journaled assignment (dualstack.go). Max pods is
	// the IPv4 number. It needs what the /80 needs (a Nitro type, an IPv6 /64 on the primary ENI's subnet) and
	// excludes EnableIPv6 and CustomNetworking.
	DualStack bool
	// PodSecurityGroupsStandard is POD_SECURITY_GROUP_ENFORCING_MODE=standard: pods of a security-group set
	// (Deps.PodSecurityGroups) reach pods of the node directly and are SNATed outside the VPC, as other pods;
	// off (strict, the default) every packet of theirs goes through the VPC, whose groups judge it.
	PodSecurityGroupsStandard bool
	// VPCRefreshInterval: the VPC's CIDR blocks are read (DescribeVpcs) at start and then at most this often,
	// with the reconcile (default 5 min).
	VPCRefreshInterval time.Duration
}

// DefaultAddWait is ENIWIRE_ADD_WAIT's default: long enough for an ENI's create and attach, well under the
// plugin's own timeout (cni.DefaultTimeout, the shipped conflists' "timeout") and the runtime's.
const DefaultAddWait = 10 * time.Second

// prefixMode says whether the node grows in /28 prefixes: asked for, on a type that takes them.
func prefixMode(cfg Config, node metadata.Node) bool {
	return cfg.EnablePrefixDelegation && node.Limits.Hypervisor != "xen"
}

// Deps are what a node controller is built from. Only EC2 and Node are required.
type Deps struct {
	EC2  ec2client.EC2API
	IMDS eni.IMDS
	Node metadata.Node
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Registerer receives the metrics (default: a private registry).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Datapath moves the pods' packets (default: dptypes.NoDriver). When it has a method RemovesHostVeth() that
	// says true, asked once here, Release tells the plugin's DEL that the agent removes the host veth.
	Datapath dptypes.Driver
	// Urgent marks a context for calls that unblock pods (ec2client.WithPriority with Urgent); may be nil.
	Urgent func(context.Context) context.Context
	// ENIConfigs says which ENIConfig applies to the node; required with Config.CustomNetworking.
	ENIConfigs subnet.ENIConfigSource
	// PodGate, if set, is passed by every ADD before the pod's datapath comes up (the agent's NetworkPolicy).
	PodGate PodGate
	// PodSecurityGroups, if set, decides each pod's security-group set at ADD (security groups for pods,
	// ENABLE_POD_ENI): pods of a set take addresses of ENIs with exactly its groups (controller/sgpool).
	PodSecurityGroups PodSecurityGroups
	// WrapJournal, if set, wraps the opened journal (tests inject crashes with it).
	WrapJournal func(Journal) Journal
}

func (c *Config) defaults() {
	if c.StateDir == "" {
		c.StateDir = "/var/lib/eniwire"
	}
	if c.Cooldown == 0 {
		c.Cooldown = 120 * time.Second
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = time.Minute
	}
	if c.MaxReconcileInterval < c.ReconcileInterval {
		c.MaxReconcileInterval = max(10*time.Minute, c.ReconcileInterval)
	}
	if c.AddWait == 0 {
		c.AddWait = DefaultAddWait
	}
	if c.PoolInterval == 0 {
		c.PoolInterval = 5 * time.Second
	}
	if c.ReleaseDelay == 0 {
		c.ReleaseDelay = time.Minute
	}
	if c.OrphanSweepInterval == 0 {
		c.OrphanSweepInterval = 5 * time.Minute
	}
	if c.GCGrace == 0 {
		c.GCGrace = 5 * time.Minute
	}
	if c.VPCRefreshInterval == 0 {
		c.VPCRefreshInterval = 5 * time.Minute
	}
	if c.VanishedPodGrace == 0 {
		c.VanishedPodGrace = 2 * time.Minute
	}
	if c.WarmENITarget == 0 && c.WarmIPTarget == 0 && c.MinimumIPTarget == 0 {
		// WARM_ENI_TARGET=1 also serves a type that turns prefix mode down.
		if c.EnablePrefixDelegation && c.WarmPrefixTarget == 0 {
			c.WarmPrefixTarget = 1
		}
		c.WarmENITarget = 1
	}
}
