package pool

import (
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
)

// PodSettings are the node's settings that max pods depends on.
type PodSettings struct {
	// MaxPods is MAX_PODS: when set, it is the answer.
	MaxPods int
	// MaxENI is MAX_ENI: the ENIs the node may hold, the primary included (0: the instance's limit).
	MaxENI int
	// Prefixes is ENABLE_PREFIX_DELEGATION: /28 prefixes asked for (counted only on a Nitro type).
	Prefixes bool
	// CustomNetworking: the primary ENI carries no pods.
	CustomNetworking bool
	// IPv6 is ENABLE_IPv6: pods take addresses of one /80, which never runs out; kubelet's number is the one
	// of prefix delegation (which IPv6 mode requires), so the 110/250 ceiling is what counts.
	IPv6 bool
}

// MaxPods is the most pods the node runs, and so the most IPs the pool holds: MAX_PODS when set, else what
// kubelet's --max-pods should be on the instance (KubeletMaxPods: the ENIs the node may hold, MAX_ENI or the
// instance's limit, times their secondary IPs, or 16 addresses a slot in prefix mode, plus 2 for host-network
// pods, capped by kubelet's ceiling of 110 or 250). The ceiling needs the type's vCPUs; without them the number
// is uncapped. A type whose hypervisor is not known counts as Nitro. The agent sizes the datapath's per-pod
// maps by it.
func MaxPods(s PodSettings, l metadata.Limits) int {
	if s.MaxPods > 0 {
		return s.MaxPods
	}
	if l.Hypervisor == "" {
		l.Hypervisor = "nitro"
	}
	pl := KubeletMaxPods(s, l)
	if l.VCPUs == 0 {
		return pl.MaxAllowed
	}
	return pl.MaxPods
}

// LimitsOf are the instance's limits as the pool counts them: secondary IPs per ENI, its primary IP aside.
func LimitsOf(l metadata.Limits) Limits {
	return Limits{MaxENIs: l.MaxENIs, IPsPerENI: max(l.IPv4PerENI-1, 0)}
}

// PodLimit is what kubelet's --max-pods should be on an instance type, and how it was reached.
type PodLimit struct {
	// MaxAllowed is what the ENIs can address: MaxPods's number (MAX_ENI counted), with journal.PrefixAddrs
	// addresses per secondary slot when Prefixes.
	MaxAllowed int `json:"maxAllowed"`
	// Ceiling is 110 on types with up to 30 vCPUs and 250 above.
	Ceiling int `json:"ceiling"`
	// MaxPods is the lesser of the two: the value for kubelet.
	MaxPods int `json:"maxPods"`
	// Prefixes says whether /28 prefixes were counted: asked for (or IPv6), and the type is Nitro.
	Prefixes bool `json:"prefixDelegation"`
	// IPv6 says the number is for ENABLE_IPv6: pods on the primary ENI's /80, the prefix-delegation number.
	IPv6 bool `json:"ipv6,omitempty"`
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
// uncapped: MaxAllowed). The agent holds no more IPs than its MaxPods. With s.CustomNetworking the primary
// ENI carries no pods, so it does not count, as with the calculator's --cni-custom-networking-enabled:
// (maxENIs-1)*(ipv4PerENI-1)+2. MAX_ENI counts the primary too, so with custom networking MAX_ENI=1 leaves no
// ENI for pods: 2, the host-network pods.
func KubeletMaxPods(s PodSettings, l metadata.Limits) PodLimit {
	pl := LimitsOf(l)
	if s.MaxENI > 0 {
		pl.MaxENIs = min(pl.MaxENIs, s.MaxENI)
	}
	if s.CustomNetworking {
		pl.MaxENIs = max(pl.MaxENIs-1, 0)
	}
	out := PodLimit{Ceiling: PodCeiling(l.VCPUs), Prefixes: (s.Prefixes || s.IPv6) && l.Nitro(), IPv6: s.IPv6}
	if out.Prefixes {
		pl.IPsPerENI *= journal.PrefixAddrs
	}
	// The ENIs pods may use are counted above: MAX_ENI is in pl already.
	t := Targets{MaxPods: s.MaxPods}
	out.MaxAllowed = t.MaxPodsFor(pl)
	out.MaxPods = min(out.MaxAllowed, out.Ceiling)
	return out
}
