package ec2sim

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"
)

// A VPC's IPv4 CIDR blocks, its security groups, tags on VPCs and groups, and subnets run dry on demand:
// the admin side of what DescribeVpcs, DescribeSecurityGroups and DescribeSubnets answer.

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

// secGroup is a security group: it belongs to one VPC. Rules are not modelled.
type secGroup struct {
	ID, VPCID, Name, Description string
	Tags                         map[string]string
}

// SecurityGroupSpec describes a security group to add. ID is generated when empty; Name defaults to the id.
type SecurityGroupSpec struct {
	ID          string            `json:"id,omitempty"`
	VPCID       string            `json:"vpcId"`
	Name        string            `json:"name,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// AddSecurityGroup adds a security group to a VPC and returns its id. Names are unique within a VPC.
func (s *Sim) AddSecurityGroup(spec SecurityGroupSpec) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vpcs[spec.VPCID] == nil {
		return "", fmt.Errorf("adding security group %s: VPC %q: %w", spec.Name, spec.VPCID, ErrNotFound)
	}
	if spec.ID == "" {
		spec.ID = s.newID("sg", func(x string) bool { return s.groups[x] != nil })
	}
	if !reGroup.MatchString(spec.ID) {
		return "", fmt.Errorf("adding security group %q: id: %w", spec.ID, ErrInvalid)
	}
	if s.groups[spec.ID] != nil {
		return "", fmt.Errorf("adding security group %s: %w", spec.ID, ErrExists)
	}
	if spec.Name == "" {
		spec.Name = spec.ID
	}
	for _, g := range s.groups {
		if g.VPCID == spec.VPCID && g.Name == spec.Name {
			return "", fmt.Errorf("adding security group %s: name %q is taken in VPC %s: %w", spec.ID, spec.Name, spec.VPCID, ErrExists)
		}
	}
	g := &secGroup{ID: spec.ID, VPCID: spec.VPCID, Name: spec.Name, Description: spec.Description, Tags: map[string]string{}}
	for k, v := range spec.Tags {
		g.Tags[k] = v
	}
	s.groups[g.ID] = g
	s.log.Info("security group added", "group", g.ID, "vpc", g.VPCID, "name", g.Name)
	return g.ID, nil
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
