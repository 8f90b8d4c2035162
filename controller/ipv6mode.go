package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

// IPv6 mode (Config.EnableIPv6), as the AWS VPC CNI's ENABLE_IPv6 runs it: the node takes one IPv6 /80 on its
// primary ENI at start and pods take addresses of it. No secondary ENI is created and no warm target applies;
// the /80 is taken through the same journaled assign as IPv4 slots (eni.Manager.EnsureIPv6Prefix), so an
// answer that may have been applied is read back from EC2 before anything is sent again.

// Errors New returns for settings IPv6 mode cannot serve.
var (
	// ErrIPv6CustomNetworking: custom networking puts pods on secondary ENIs, and IPv6 mode has none (the AWS
	// VPC CNI does not support the two together either).
	ErrIPv6CustomNetworking = errors.New("ENABLE_IPv6 cannot be used with custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): " +
		"IPv6 pods take addresses of the primary ENI's /80 and no secondary ENI is created")
	// ErrIPv6NoSubnetBlock: the primary ENI's subnet holds no IPv6 /64 (IMDS lists no subnet-ipv6-cidr-blocks),
	// so EC2 would refuse every AssignIpv6Addresses.
	ErrIPv6NoSubnetBlock = errors.New("ENABLE_IPv6 needs the primary ENI's subnet to hold an IPv6 /64 " +
		"(AssociateSubnetCidrBlock); IMDS lists no subnet-ipv6-cidr-blocks for it")
	// ErrIPv6NotNitro: EC2 gives IPv6 prefixes to Nitro types only.
	ErrIPv6NotNitro = errors.New("ENABLE_IPv6 needs a Nitro instance type: EC2 assigns IPv6 /80 prefixes to Nitro types only")
)

// checkIPv6Mode refuses the settings IPv6 mode cannot serve on node: custom networking, a Xen type, a subnet
// without an IPv6 block.
func checkIPv6Mode(cfg Config, node metadata.Node) error {
	if !cfg.EnableIPv6 && !cfg.DualStack {
		return nil
	}
	switch {
	case cfg.EnableIPv6 && cfg.DualStack:
		return ErrDualStackAndIPv6Mode
	case cfg.CustomNetworking:
		return ErrIPv6CustomNetworking
	case node.Limits.Hypervisor == "xen":
		return fmt.Errorf("%w (%s is a Xen type)", ErrIPv6NotNitro, node.InstanceType)
	case len(node.IPv6.SubnetCIDRs) == 0:
		return fmt.Errorf("%w (subnet %s)", ErrIPv6NoSubnetBlock, node.SubnetID)
	}
	return nil
}

// pick is the address a new pod gets and its ENI: in IPv6 mode one of the /80 while the pods are fewer than
// max pods (kubelet's number: the /80 never runs out), else a free IP of the warm pool; in dual-stack mode an
// address of the /80 as well (pickDualStack). It needs p.books.mu held.
func (p *ipam) pick(v *pool.View) (ip, ipv6 string, e *journal.ENI, ok bool) {
	switch {
	case p.dual:
		return p.pickDualStack(v)
	case !p.ipv6:
		ip, e, ok = v.Pick(p.avail)
		return ip, "", e, ok
	case len(p.books.st.Assignments) >= p.targets.MaxPods:
		return "", "", nil, false
	}
	ip, e, ok = v.PickIPv6(p.avail)
	return ip, "", e, ok
}

// ipv6Counts are the pods holding addresses of e's /80s, and as many free addresses as max pods leaves (the
// /80 never runs out: pick's bound), so the status and the node's readiness see IPv6 mode's pool. It needs
// p.books.mu held.
func (p *ipam) ipv6Counts(e *journal.ENI, st *journal.State) api.IPCounts {
	var c api.IPCounts
	if !p.ipv6 || len(e.IPv6Prefixes) == 0 {
		return c
	}
	for _, a := range st.Assignments {
		if a.ENI == e.ID && strings.Contains(a.IP, ":") {
			c.Assigned++
		}
	}
	c.Warm = max(p.targets.MaxPods-len(st.Assignments), 0)
	return c
}

// stepIPv6 is the pool manager's round in IPv6 mode: the primary ENI holds the node's /80, or gets it. It
// reports whether the books changed.
func (m *poolManager) stepIPv6(ctx context.Context) bool {
	primary, assigned := "", 0
	m.books.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.Primary && e.Usable() {
				primary = e.ID
			}
		}
		assigned = len(st.Assignments)
	})
	if primary == "" {
		m.resting.set("IPv6 mode: the primary ENI is not in the books yet")
		return false
	}
	m.resting.set("")
	changed, err := m.eni.EnsureIPv6Prefix(ctx, primary)
	if err != nil {
		return m.result(err, "taking the node's IPv6 /80 on the primary ENI")
	}
	if changed {
		m.lastFailure.set("")
		m.pause.calm()
	}
	if m.ipv6 && assigned >= m.targets.MaxPods {
		// IPv6 mode's pool is the /80, which never runs out: max pods is what stops new pods (in dual-stack
		// mode the IPv4 round says it).
		m.resting.setBecause(api.PoolMaxPods, maxPodsReached(assigned, m.targets.MaxPods).Error())
	}
	return changed
}

// holdsIPv6 reports whether a usable ENI holds a /80 (dual-stack pods' IPv6 addresses).
func (m *poolManager) holdsIPv6() bool {
	held := false
	m.books.View(func(st *journal.State) {
		held = slices.ContainsFunc(st.ENIs, func(e journal.ENI) bool { return e.Usable() && len(e.IPv6Prefixes) > 0 })
	})
	return held
}
