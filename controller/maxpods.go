package controller

import (
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

// MaxPods is the most pods the node runs, as the pool manager caps it: MAX_PODS when set, else the ENIs the
// node may hold (MAX_ENI, or the instance's limit) times their secondary IPs, plus 2 for host-network pods
// (the VPC CNI's formula). The agent sizes the datapath's per-pod maps by it.
func MaxPods(cfg Config, info NodeInfo) int {
	return poolTargets(cfg, info).MaxPodsFor(poolLimits(info))
}

// poolTargets are the pool's settings from the node's. WARM_PREFIX_TARGET counts only in prefix mode.
func poolTargets(cfg Config, info NodeInfo) pool.Targets {
	t := pool.Targets{WarmENI: cfg.WarmENITarget, WarmIP: cfg.WarmIPTarget, MinimumIP: cfg.MinimumIPTarget,
		MaxENI: cfg.MaxENI, MaxPods: cfg.MaxPods, Prefixes: prefixMode(cfg, info)}
	if t.Prefixes {
		t.WarmPrefix = cfg.WarmPrefixTarget
	}
	return t
}

// poolLimits are the instance's limits as the pool counts them: secondary IPs per ENI, its primary IP aside.
func poolLimits(info NodeInfo) pool.Limits {
	return pool.Limits{MaxENIs: info.MaxENIs, IPsPerENI: max(info.IPv4PerENI-1, 0)}
}

// IPsPerPrefix is the addresses of an IPv4 /28 prefix, each of which takes one IPv4 slot of its ENI.
const IPsPerPrefix = 16

// PodLimit is what kubelet's --max-pods should be on an instance type, and how it was reached.
type PodLimit struct {
	// MaxAllowed is what the ENIs can address: MaxPods's number (MAX_ENI counted), with IPsPerPrefix
	// addresses per secondary slot when Prefixes.
	MaxAllowed int `json:"maxAllowed"`
	// Ceiling is 110 on types with up to 30 vCPUs and 250 above.
	Ceiling int `json:"ceiling"`
	// MaxPods is the lesser of the two: the value for kubelet.
	MaxPods int `json:"maxPods"`
	// Prefixes says whether /28 prefixes were counted: asked for, and the type is Nitro.
	Prefixes bool `json:"prefixDelegation"`
}

// PodCeiling is the AWS VPC CNI's max-pods-calculator.sh ceiling: 110 pods up to 30 vCPUs, 250 above.
func PodCeiling(vcpus int) int {
	if vcpus > 30 {
		return 250
	}
	return 110
}

// KubeletMaxPods computes PodLimit the way the AWS VPC CNI's max-pods-calculator.sh does: the ceiling
// applies with and without prefixes, and a type that is not Nitro falls back to secondary IPs. The
// secondary-IP number is MaxPods's, so it matches the AWS VPC CNI's published eni-max-pods.txt (which is
// uncapped: MaxAllowed). The agent itself keeps MaxPods (uncapped, no prefixes) until prefix mode exists.
func KubeletMaxPods(cfg Config, l metadata.Limits, prefixes bool) PodLimit {
	pl := poolLimits(NodeInfo{MaxENIs: l.MaxENIs, IPv4PerENI: l.IPv4PerENI})
	out := PodLimit{Ceiling: PodCeiling(l.VCPUs), Prefixes: prefixes && l.Nitro()}
	if out.Prefixes {
		pl.IPsPerENI *= IPsPerPrefix
	}
	out.MaxAllowed = poolTargets(cfg, NodeInfo{}).MaxPodsFor(pl)
	out.MaxPods = min(out.MaxAllowed, out.Ceiling)
	return out
}
