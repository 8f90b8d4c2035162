package vpcfabric

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sort"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// The router enforces EC2's security groups, statefully and in both directions, as EC2 does at every ENI:
// a packet of a new flow forwarded from an ENI must be admitted by the egress rules of one of the ENI's
// groups, one forwarded to an ENI by the ingress rules of one of its groups, and every packet of a flow
// both sides admitted (and what it relates to, as ICMP errors) passes, so that a rule change applies to
// new flows only. Rules admit peers by CIDR or by group, a group standing for the private addresses and
// prefixes of every ENI that carries it. The VPC host can be given groups of its own
// (SetVPCHostSecurityGroups); the internet and on-premises hosts carry none, and what the router itself
// answers (IMDS, the EC2 endpoint: its input hook) is not subject to groups, as on EC2.
//
// The simulator's events keep the fabric's copy of the groups (their rules, each wired ENI's groups)
// current; after every event the fabric works out the nftables objects that state them (secgroups_nft.go)
// and writes what changed, in one transaction.

// carrier is something the router applies groups to: a wired ENI, or the VPC host. link is its router
// link, addrs are the addresses a rule naming one of its groups admits.
type carrier struct {
	link   string
	groups []string
	addrs  []netip.Prefix
}

// securityGroups is the fabric's copy of the VPC's security groups and what the router holds of them;
// f.mu guards it.
type securityGroups struct {
	// rules are each group's rules as last heard from the simulator (a deleted group has none).
	rules map[string]ec2sim.SecurityGroupRules
	// vpcHost are the VPC host's groups; none leaves the VPC host unfiltered.
	vpcHost []string
	applied nftState
}

// installSecurityGroups loads the table whose chains enforce security groups; no ENI carries any yet.
func (f *Fabric) installSecurityGroups() error {
	if _, err := nft(f.vpc.path(), sgSkeleton, "-f", "-"); err != nil {
		return fmt.Errorf("installing the router's security groups: %w", err)
	}
	f.sg = &securityGroups{rules: map[string]ec2sim.SecurityGroupRules{}, applied: emptyNFTState()}
	return nil
}

// noteGroupEventLocked records what a security group event changed; enforceLocked then applies it.
func (f *Fabric) noteGroupEventLocked(ev ec2sim.Event) {
	switch e := ev.(type) {
	case ec2sim.SecurityGroupChanged:
		if e.Deleted {
			f.sg.rules[e.GroupID] = ec2sim.SecurityGroupRules{}
		} else {
			f.sg.rules[e.GroupID] = e.Rules
		}
	case ec2sim.ENISecurityGroupsChanged:
		// An ENI not wired yet takes its groups from the simulator when it is.
		if en := f.enis[e.ENIID]; en != nil {
			en.groups = slices.Clone(e.Groups)
		}
	}
}

// carriersLocked lists what the router applies groups to, in link order.
func (f *Fabric) carriersLocked() []carrier {
	var out []carrier
	for _, e := range f.enis {
		c := carrier{link: e.routerLink, groups: e.groups}
		for d := range e.dsts {
			c.addrs = append(c.addrs, d)
		}
		out = append(out, c)
	}
	if len(f.sg.vpcHost) > 0 {
		out = append(out, carrier{link: vpcHostLink, groups: f.sg.vpcHost,
			addrs: []netip.Prefix{netip.PrefixFrom(f.vpcHost.IP, 32), netip.PrefixFrom(f.vpcHost.IPv6, 128)}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].link < out[j].link })
	return out
}

// enforceLocked writes into the router what changed of the groups since the last call. The rules of a
// carried group the fabric has not heard of yet are read from the simulator; a group it does not know
// admits nothing.
func (f *Fabric) enforceLocked() error {
	carriers := f.carriersLocked()
	for _, c := range carriers {
		for _, g := range c.groups {
			if _, ok := f.sg.rules[g]; ok {
				continue
			}
			if spec, err := f.sim.SecurityGroup(g); err == nil {
				f.sg.rules[g] = *spec.Rules
			}
		}
	}
	want := desiredNFTState(carriers, f.sg.rules)
	script := f.sg.applied.changesTo(want)
	if script == "" {
		return nil
	}
	if _, err := nft(f.vpc.path(), script, "-f", "-"); err != nil {
		return fmt.Errorf("enforcing security groups: %w", err)
	}
	f.sg.applied = want
	f.log.Info("security groups enforced", "carriers", len(carriers), "groups", len(want.groupChains()))
	return nil
}

// SetVPCHostSecurityGroups makes the VPC host carry these groups of the simulator, as an instance of the
// VPC would: new flows to it must be admitted by the ingress rules of one of them, new flows from it by
// the egress rules of one, and a rule that names one of them admits the VPC host's addresses. With no
// groups (the default) the VPC host is not filtered. A group deleted later admits nothing.
func (f *Fabric) SetVPCHostSecurityGroups(groupIDs ...string) error {
	for _, g := range groupIDs {
		if _, err := f.sim.SecurityGroup(g); err != nil {
			return fmt.Errorf("giving the VPC host security group %s: %w", g, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.sg.vpcHost = slices.Clone(groupIDs)
	err := f.enforceLocked()
	close(f.changed)
	f.changed = make(chan struct{})
	if err != nil {
		return fmt.Errorf("giving the VPC host security groups %v: %w", groupIDs, err)
	}
	f.log.Info("VPC host security groups set", "groups", groupIDs)
	return nil
}

// WaitSecurityGroups blocks until the router enforces the simulator's security groups as they are now:
// every wired ENI's groups, and the rules of every group an ENI or the VPC host carries. Call it after
// changing groups or rules and before testing what they admit.
func (f *Fabric) WaitSecurityGroups(ctx context.Context) error {
	return f.waitFor(ctx, "security groups in step with the simulator", func() bool {
		for _, c := range f.carriersLocked() {
			for _, g := range c.groups {
				spec, err := f.sim.SecurityGroup(g)
				if err != nil {
					continue // deleted: it admits nothing once its event is applied
				}
				if have, ok := f.sg.rules[g]; !ok || !reflect.DeepEqual(have, *spec.Rules) {
					return false
				}
			}
		}
		for id, e := range f.enis {
			if st, ok := f.sim.ENI(id); ok && !slices.Equal(st.Groups, e.groups) {
				return false
			}
		}
		return true
	})
}

// SecurityGroupDrops is how many packets the router dropped because no group of the ENI admitted them:
// new flows out of the ENI that no egress rule admits and new flows to it that no ingress rule admits.
func (f *Fabric) SecurityGroupDrops(eniID string) (drops uint64, err error) {
	err = f.withRouterLink(eniID, func(link string) error {
		drops, err = readNamedCounter(f.vpc.path(), "inet", sgTable, dropCounter(link))
		return err
	})
	return drops, err
}

// VPCHostSecurityGroupDrops is SecurityGroupDrops for the VPC host (0 while it carries no group).
func (f *Fabric) VPCHostSecurityGroupDrops() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if !f.sg.applied.counters[dropCounter(vpcHostLink)] {
		return 0, nil
	}
	return readNamedCounter(f.vpc.path(), "inet", sgTable, dropCounter(vpcHostLink))
}
