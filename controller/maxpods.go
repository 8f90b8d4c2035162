package controller

import (
	"fmt"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

// MaxPods is the most pods the node runs, and so the most IPs the pool holds: MAX_PODS when set, else what
// kubelet's --max-pods should be on the instance (KubeletMaxPods: the ENIs the node may hold, MAX_ENI or the
// instance's limit, times their secondary IPs, or 16 addresses a slot in prefix mode, plus 2 for host-network
// pods, capped by kubelet's ceiling of 110 or 250). The ceiling needs the type's vCPUs; without them the number
// is uncapped. The agent sizes the datapath's per-pod maps by it.
func MaxPods(cfg Config, info NodeInfo) int {
	if cfg.MaxPods > 0 {
		return cfg.MaxPods
	}
	hv := info.Hypervisor
	if hv == "" {
		hv = "nitro"
	}
	pl := KubeletMaxPods(cfg, metadata.Limits{MaxENIs: info.MaxENIs, IPv4PerENI: info.IPv4PerENI, VCPUs: info.VCPUs,
		Hypervisor: hv}, cfg.EnablePrefixDelegation)
	if info.VCPUs == 0 {
		return pl.MaxAllowed
	}
	return pl.MaxPods
}

// maxPodsReached says that the pods hold as many IPs as max pods allows: the answer to a pod beyond it, and
// (its text) the pool's status line meanwhile.
func maxPodsReached(assigned, maxPods int) error {
	return fmt.Errorf("%w (%d/%d pods assigned): no IP for another pod until one leaves", ErrMaxPods, assigned, maxPods)
}

// poolTargets are the pool's settings from the node's: the pod cap is MaxPods. WARM_PREFIX_TARGET counts only
// in prefix mode.
func poolTargets(cfg Config, info NodeInfo) pool.Targets {
	t := pool.Targets{WarmENI: cfg.WarmENITarget, WarmIP: cfg.WarmIPTarget, MinimumIP: cfg.MinimumIPTarget,
		MaxENI: cfg.MaxENI, MaxPods: MaxPods(cfg, info), Prefixes: prefixMode(cfg, info)}
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
// uncapped: MaxAllowed). The agent holds no more IPs than its MaxPods. With cfg.CustomNetworking the primary
// ENI carries no pods, so it does not count, as with the calculator's --cni-custom-networking-enabled:
// (maxENIs-1)*(ipv4PerENI-1)+2. MAX_ENI counts the primary too, so with custom networking MAX_ENI=1 leaves no
// ENI for pods: 2, the host-network pods.
func KubeletMaxPods(cfg Config, l metadata.Limits, prefixes bool) PodLimit {
	pl := poolLimits(NodeInfo{MaxENIs: l.MaxENIs, IPv4PerENI: l.IPv4PerENI})
	if cfg.MaxENI > 0 {
		pl.MaxENIs = min(pl.MaxENIs, cfg.MaxENI)
	}
	if cfg.CustomNetworking {
		pl.MaxENIs = max(pl.MaxENIs-1, 0)
	}
	out := PodLimit{Ceiling: PodCeiling(l.VCPUs), Prefixes: prefixes && l.Nitro()}
	if out.Prefixes {
		pl.IPsPerENI *= IPsPerPrefix
	}
	// The ENIs pods may use are counted above: MAX_ENI is in pl already.
	t := pool.Targets{MaxPods: cfg.MaxPods}
	out.MaxAllowed = t.MaxPodsFor(pl)
	out.MaxPods = min(out.MaxAllowed, out.Ceiling)
	return out
}
