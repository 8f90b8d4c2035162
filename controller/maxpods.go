package controller

import "github.com/eniwire/eniwire/controller/pool"

// MaxPods is the most pods the node runs, as the pool manager caps it: MAX_PODS when set, else the ENIs the
// node may hold (MAX_ENI, or the instance's limit) times their secondary IPs, plus 2 for host-network pods
// (the VPC CNI's formula). The agent sizes the datapath's per-pod maps by it.
func MaxPods(cfg Config, info NodeInfo) int {
	return poolTargets(cfg).MaxPodsFor(poolLimits(info))
}

// poolTargets are the pool's settings from the node's.
func poolTargets(cfg Config) pool.Targets {
	return pool.Targets{WarmENI: cfg.WarmENITarget, WarmIP: cfg.WarmIPTarget, MinimumIP: cfg.MinimumIPTarget,
		MaxENI: cfg.MaxENI, MaxPods: cfg.MaxPods}
}

// poolLimits are the instance's limits as the pool counts them: secondary IPs per ENI, its primary IP aside.
func poolLimits(info NodeInfo) pool.Limits {
	return pool.Limits{MaxENIs: info.MaxENIs, IPsPerENI: max(info.IPv4PerENI-1, 0)}
}
