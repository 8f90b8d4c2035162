package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
)

// DefaultPinRoot is where the agent pins. The layout below it ({maps,links}/) is an API: a change that
// breaks it moves to a new version directory.
const DefaultPinRoot = "/sys/fs/bpf/eniwire/v1"

const (
	mapsDir  = "maps"
	linksDir = "links"
)

// AttachMode chooses how programs are attached to interfaces.
type AttachMode int

const (
	// AttachAuto uses tcx links and falls back to clsact + cls_bpf when the kernel lacks tcx.
	AttachAuto AttachMode = iota
	// AttachTCX uses tcx links only.
	AttachTCX
	// AttachClsact uses a clsact qdisc and a direct-action cls_bpf filter only.
	AttachClsact
)

func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachTCX:
		return "tcx"
	case AttachClsact:
		return "clsact"
	}
	return fmt.Sprintf("attach-mode-%d", int(m))
}

// Config is what Open needs.
type Config struct {
	// PinRoot is the bpffs directory holding maps/ and links/; DefaultPinRoot when empty. Tests use a
	// unique directory.
	PinRoot string
	// VPCCIDRs are the destinations from_pod sends out of the pod's own ENI.
	VPCCIDRs []netip.Prefix
	// ExcludeSNATCIDRs (AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS) are routes of the VPC for the programs, as the
	// AWS VPC CNI treats them: pods reach them by their own ENI untranslated, and with SNAT a client in them
	// reaches a pod on the fast path, while one outside every VPC route goes through the host (to_pod), so
	// that conntrack sees the request before the reply it masquerades or lets pass.
	ExcludeSNATCIDRs []netip.Prefix
	// NodeIPs are the node's own addresses: packets to them go to the host stack, never out of an ENI.
	// SetNodeIPs replaces them at run time (the agent passes every local address and follows changes).
	// 169.254.0.0/16 goes to the host stack as well, always.
	NodeIPs []netip.Addr
	// HostCIDRs are further destinations always handed to the host stack, such as the Service CIDR when it
	// lies inside the VPC or when SNAT is off (so kube-proxy can DNAT them).
	HostCIDRs []netip.Prefix
	// MaxPods is the most pods this node runs (the agent passes pool.MaxPods: MAX_PODS, else what its
	// ENIs hold); it sizes the per-pod traffic map. DefaultMaxPods when zero. A change (a new MAX_PODS, an
	// instance resized) replaces the map at the next Open: its counters start from zero.
	MaxPods int
	// SNAT is true unless external SNAT is configured. With it on, destinations outside the VPC go to the
	// host stack (which masquerades them); with it off, they leave by the pod's ENI.
	SNAT bool
	// NetworkPolicy attaches eniw_forward at the node's IPv4 FORWARD hook (a netfilter link, Linux 6.4 or
	// later), which judges the policies of SetPodPolicy on the flows the host stack carries (Services,
	// NodePorts, SNAT) after DNAT and before SNAT. The fast paths judge them whatever this says; the agent
	// sets no policy when enforcement is off.
	NetworkPolicy bool
	// Attach chooses tcx or clsact; AttachAuto prefers tcx.
	Attach AttachMode
	// MigrateMaps allows Open to replace a pinned map that no longer matches the programs (type, sizes,
	// flags, or the layout its BTF describes). When only its size or flags changed, its entries are
	// carried over before any link moves to the new programs; when its layout changed, it starts empty
	// and the caller rewrites it with Restore between Load and Attach (the agent does, from its journal:
	// restore.go); per-CPU statistics start from zero. Without it, Load returns a *MapIncompatibleError.
	MigrateMaps bool
	// Logger receives one line per state change; slog.Default() when nil.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.PinRoot == "" {
		c.PinRoot = DefaultPinRoot
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxPods <= 0 {
		c.MaxPods = DefaultMaxPods
	}
	return c
}

// DefaultMaxPods sizes the per-pod traffic map when Config.MaxPods is unset (tests, tools): above the
// secondary IPs of the large common instance types (15 ENIs of 50 IPs). The agent passes its own limit.
const DefaultMaxPods = 1024

// ErrMapIncompatible matches a *MapIncompatibleError.
var ErrMapIncompatible = errors.New("pinned map is incompatible with the programs")

// MapIncompatibleError says which pinned map blocks loading and why. Set Config.MigrateMaps to replace it.
type MapIncompatibleError struct {
	Map string
	Pin string
	Err error
}

func (e *MapIncompatibleError) Error() string {
	return fmt.Sprintf("pinned map %s at %s needs a migration (set MigrateMaps): %v", e.Map, e.Pin, e.Err)
}

func (e *MapIncompatibleError) Is(target error) bool { return target == ErrMapIncompatible }

func (e *MapIncompatibleError) Unwrap() error { return e.Err }
