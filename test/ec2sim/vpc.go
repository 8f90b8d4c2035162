package ec2sim

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"
)

// A VPC's IPv4 CIDR blocks, tags on VPCs and groups, and subnets run dry on demand: the admin side of what
// DescribeVpcs, DescribeSecurityGroups and DescribeSubnets answer (security groups: secgroup.go).

// maxVPCBlocks is EC2's default quota of IPv4 CIDR blocks per VPC (the primary included).
const maxVPCBlocks = 5

// cidrBlock is one IPv4 block associated with a VPC.
type cidrBlock struct {
	AssociationID string
	CIDR          netip.Prefix
}

// associationID is a block's association id, derived from the VPC and the block so that adding blocks
// does not draw from the random source that names ENIs and MACs (default worlds keep their ids).
func associationID(vpcID string, p netip.Prefix) string {
	h := fnv.New64a()
	h.Write([]byte(vpcID + "|" + p.String()))
	return fmt.Sprintf("vpc-cidr-assoc-0%016x", h.Sum64())
}

// blockOf returns the VPC's block that holds all of p, or nil.
func (v *vpc) blockOf(p netip.Prefix) *cidrBlock {
	for i := range v.Blocks {
		b := &v.Blocks[i]
		if b.CIDR.Contains(p.Addr()) && p.Bits() >= b.CIDR.Bits() {
			return b
		}
	}
	return nil
}

// blockList is the VPC's blocks as strings, the primary first.
func (v *vpc) blockList() []string {
	out := make([]string, len(v.Blocks))
	for i, b := range v.Blocks {
		out[i] = b.CIDR.String()
	}
	return out
}

// AddVPCCIDRBlock associates a further IPv4 CIDR block (a /16 to a /28, e.g. 100.64.0.0/16) with a VPC, as
// AssociateVpcCidrBlock does, and returns the association id. The block must not overlap the VPC's others,
// and a VPC holds at most five.
func (s *Sim) AddVPCCIDRBlock(vpcID, cidr string) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 28 {
		return "", fmt.Errorf("adding CIDR block to VPC %s: %q (an IPv4 /16 to /28): %w", vpcID, cidr, ErrInvalid)
	}
	p = p.Masked()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vpcs[vpcID]
	if v == nil {
		return "", fmt.Errorf("adding CIDR block to VPC %s: %w", vpcID, ErrNotFound)
	}
	for _, b := range v.Blocks {
		if b.CIDR.Overlaps(p) {
			return "", fmt.Errorf("adding CIDR block %s to VPC %s: overlaps %s: %w", p, vpcID, b.CIDR, ErrExists)
		}
	}
	if len(v.Blocks) >= maxVPCBlocks {
		return "", fmt.Errorf("adding CIDR block %s to VPC %s: the VPC has %d blocks already: %w", p, vpcID, len(v.Blocks), ErrInvalid)
	}
	b := cidrBlock{AssociationID: associationID(vpcID, p), CIDR: p}
	v.Blocks = append(v.Blocks, b)
	s.log.Info("vpc cidr block associated", "vpc", vpcID, "cidr", p, "association", b.AssociationID)
	return b.AssociationID, nil
}

// SetTags adds (or overwrites) tags on a VPC, subnet, security group, instance or ENI, as CreateTags does.
func (s *Sim) SetTags(resourceID string, tags map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.tagsOfLocked(resourceID)
	if m == nil {
		return fmt.Errorf("tagging %s: %w", resourceID, ErrNotFound)
	}
	for k, v := range tags {
		m[k] = v
	}
	return nil
}

// tagsOfLocked returns the live tag map of a resource, nil when there is no such resource.
func (s *Sim) tagsOfLocked(id string) map[string]string {
	switch {
	case strings.HasPrefix(id, "vpc-"):
		if v := s.vpcs[id]; v != nil {
			return v.Tags
		}
	case strings.HasPrefix(id, "subnet-"):
		if sn := s.subnets[id]; sn != nil {
			return sn.Tags
		}
	case strings.HasPrefix(id, "sg-"):
		if g := s.groups[id]; g != nil {
			return g.Tags
		}
	case strings.HasPrefix(id, "eni-"):
		if e := s.enis[id]; e != nil {
			return e.Tags
		}
	case strings.HasPrefix(id, "i-"):
		if inst := s.instances[id]; inst != nil {
			return inst.Tags
		}
	}
	return nil
}

// ExhaustSubnet takes every free address of a subnet but keepFree, as if other tenants had used them, and
// returns how many it took: CreateNetworkInterface and AssignPrivateIpAddresses there then answer
// InsufficientFreeAddressesInSubnet once they need more than keepFree, and AvailableIpAddressCount says
// keepFree. RefillSubnet gives them back.
func (s *Sim) ExhaustSubnet(subnetID string, keepFree int) (int, error) {
	if keepFree < 0 {
		return 0, fmt.Errorf("exhausting subnet %s: keepFree %d: %w", subnetID, keepFree, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.subnets[subnetID]
	if sn == nil {
		return 0, fmt.Errorf("exhausting subnet %s: %w", subnetID, ErrNotFound)
	}
	n := sn.hold(sn.Free() - keepFree)
	s.log.Info("subnet exhausted", "subnet", subnetID, "taken", n, "free", sn.Free())
	return n, nil
}

// RefillSubnet releases the addresses ExhaustSubnet took from a subnet and returns how many.
func (s *Sim) RefillSubnet(subnetID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.subnets[subnetID]
	if sn == nil {
		return 0, fmt.Errorf("refilling subnet %s: %w", subnetID, ErrNotFound)
	}
	n := sn.unhold()
	s.log.Info("subnet refilled", "subnet", subnetID, "released", n, "free", sn.Free())
	return n, nil
}
