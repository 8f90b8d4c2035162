package controller

import (
	"fmt"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

// PodSettings are the settings max pods depends on (pool.MaxPods, pool.KubeletMaxPods).
func (c Config) PodSettings() pool.PodSettings {
	return pool.PodSettings{MaxPods: c.MaxPods, MaxENI: c.MaxENI, Prefixes: c.EnablePrefixDelegation,
		CustomNetworking: c.CustomNetworking, IPv6: c.EnableIPv6}
}

// maxPodsReached says that the pods hold as many IPs as max pods allows: the answer to a pod beyond it, and
// (its text) the pool's status line meanwhile.
func maxPodsReached(assigned, maxPods int) error {
	return fmt.Errorf("%w (%d/%d pods assigned): no IP for another pod until one leaves", ErrMaxPods, assigned, maxPods)
}

// poolTargets are the pool's settings from the node's: the pod cap is pool.MaxPods. WARM_PREFIX_TARGET counts
// only in prefix mode.
func poolTargets(cfg Config, node metadata.Node) pool.Targets {
	t := pool.Targets{WarmENI: cfg.WarmENITarget, WarmIP: cfg.WarmIPTarget, MinimumIP: cfg.MinimumIPTarget,
		MaxENI: cfg.MaxENI, MaxPods: pool.MaxPods(cfg.PodSettings(), node.Limits), Prefixes: prefixMode(cfg, node)}
	if t.Prefixes {
		t.WarmPrefix = cfg.WarmPrefixTarget
	}
	return t
}
