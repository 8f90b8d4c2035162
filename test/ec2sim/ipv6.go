package ec2sim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"slices"
)

// IPv6 as EC2 gives it: a VPC holds /56 blocks, a subnet at most one /64 out of them, and an ENI single
// addresses and /80 prefixes out of its subnet's /64 (docs/ec2-facts.md, "IPv6"). AWS reserves the first
// four addresses and the last one of a subnet's /64, as it does in the subnet's IPv4 block, so the first and
// the last /80 of the /64 are never handed out as prefixes.

// maxVPCIPv6Blocks is EC2's default quota of IPv6 CIDR blocks per VPC.
const maxVPCIPv6Blocks = 5

// maxIPv6PerENI bounds the IPv6 addresses and prefixes of an ENI that no instance holds (the largest
// Ipv6AddressesPerInterface of the types here), as maxIPv4PerENI does for IPv4.
const maxIPv6PerENI = 50

// amazonIPv6Pool is where the simulator carves Amazon-provided /56 blocks from (a /32 of Amazon's).
var amazonIPv6Pool = netip.MustParsePrefix("2600:1f14::/32")

// subnetIPv6 is a subnet's IPv6 /64 and who holds what in it: single addresses, and /80 prefixes. An
// address never lies inside another holder's prefix.
type subnetIPv6 struct {
	AssociationID string
	CIDR          netip.Prefix
	addrs         map[netip.Addr]*eni
	prefixes      map[netip.Prefix]*eni
	// inSlash80 counts the single addresses inside each /80, by the /80's index in the /64.
	inSlash80 map[uint16]int
	rng       *rand.Rand
}

func newSubnetIPv6(seed int64, subnetID string, p netip.Prefix) *subnetIPv6 {
	h := fnv.New64a()
	h.Write([]byte(subnetID))
	return &subnetIPv6{AssociationID: subnetAssociationID(subnetID, p), CIDR: p, addrs: map[netip.Addr]*eni{},
		prefixes: map[netip.Prefix]*eni{}, inSlash80: map[uint16]int{}, rng: rand.New(rand.NewPCG(uint64(seed), h.Sum64()))}
}

func subnetAssociationID(subnetID string, p netip.Prefix) string {
	h := fnv.New64a()
	h.Write([]byte(subnetID + "|" + p.String()))
	return fmt.Sprintf("subnet-cidr-assoc-0%016x", h.Sum64())
}

// slash80 is the index of the /80 of the /64 that holds a.
func slash80(a netip.Addr) uint16 {
	b := a.As16()
	return binary.BigEndian.Uint16(b[8:10])
}

// hostPart is a's lower 64 bits.
func hostPart(a netip.Addr) uint64 {
	b := a.As16()
	return binary.BigEndian.Uint64(b[8:])
}

func (sv *subnetIPv6) addr(host uint64) netip.Addr {
	b := sv.CIDR.Addr().As16()
	binary.BigEndian.PutUint64(b[8:], host)
	return netip.AddrFrom16(b)
}

func (sv *subnetIPv6) prefix(idx uint16) netip.Prefix {
	return netip.PrefixFrom(sv.addr(uint64(idx)<<48), 80)
}

// reserved says whether a is one of the addresses AWS keeps for itself.
func reserved(a netip.Addr) bool {
	h := hostPart(a)
	return h < 4 || h == ^uint64(0)
}

// addrFree says whether a may be handed to an ENI: inside the /64, not reserved, held by nobody, and not
// inside a prefix.
func (sv *subnetIPv6) addrFree(a netip.Addr) bool {
	if !a.Is6() || !sv.CIDR.Contains(a) || reserved(a) || sv.addrs[a] != nil {
		return false
	}
	return sv.prefixes[sv.prefix(slash80(a))] == nil
}

// prefixFree says whether the /80 p may be handed to an ENI: inside the /64, holding no reserved address,
// no address and no other prefix.
func (sv *subnetIPv6) prefixFree(p netip.Prefix) bool {
	if p.Bits() != 80 || p.Masked() != p || !sv.CIDR.Contains(p.Addr()) {
		return false
	}
	idx := slash80(p.Addr())
	return idx != 0 && idx != 0xffff && sv.prefixes[p] == nil && sv.inSlash80[idx] == 0
}

func (sv *subnetIPv6) takeAddr(a netip.Addr, e *eni) {
	sv.addrs[a] = e
	sv.inSlash80[slash80(a)]++
}

func (sv *subnetIPv6) releaseAddr(a netip.Addr) {
	if sv.addrs[a] == nil {
		return
	}
	delete(sv.addrs, a)
	idx := slash80(a)
	if sv.inSlash80[idx]--; sv.inSlash80[idx] == 0 {
		delete(sv.inSlash80, idx)
	}
}

// allocateAddrs takes n random free addresses for e, as EC2 picks them.
func (sv *subnetIPv6) allocateAddrs(n int, e *eni) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for len(out) < n {
		if a := sv.addr(sv.rng.Uint64()); sv.addrFree(a) {
			sv.takeAddr(a, e)
			out = append(out, a)
		}
	}
	return out
}

// pickPrefixes chooses n free /80s at random, as EC2 does, without taking them, or returns nil when the
// /64 has fewer than n free. None holds an address of avoid (those the same call takes by name).
func (sv *subnetIPv6) pickPrefixes(n int, avoid []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	ok := func(p netip.Prefix) bool {
		return sv.prefixFree(p) && !slices.Contains(out, p) && !slices.ContainsFunc(avoid, p.Contains)
	}
	for tries := 0; len(out) < n && tries < 64*n; tries++ {
		if p := sv.prefix(uint16(sv.rng.UintN(0xfffe) + 1)); ok(p) {
			out = append(out, p)
		}
	}
	for idx := 1; len(out) < n && idx < 0xffff; idx++ { // a crowded /64: scan it
		if p := sv.prefix(uint16(idx)); ok(p) {
			out = append(out, p)
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}

// ownerOf is the ENI that holds a, as an address or inside a prefix, or nil.
func (sv *subnetIPv6) ownerOf(a netip.Addr) *eni {
	if e := sv.addrs[a]; e != nil {
		return e
	}
	if !sv.CIDR.Contains(a) {
		return nil
	}
	return sv.prefixes[sv.prefix(slash80(a))]
}

// ipv6CIDR is the subnet's IPv6 /64 as a string, "" when it has none.
func (sn *subnet) ipv6CIDR() string {
	if sn.IPv6 == nil {
		return ""
	}
	return sn.IPv6.CIDR.String()
}

// ipv6Block is one IPv6 block associated with a VPC.
type ipv6Block struct {
	AssociationID string
	CIDR          netip.Prefix
}

func (v *vpc) ipv6BlockList() []string {
	out := make([]string, len(v.IPv6Blocks))
	for i, b := range v.IPv6Blocks {
		out[i] = b.CIDR.String()
	}
	return out
}

// ipv6BlockOf returns the VPC's IPv6 block that holds all of p, or nil.
func (v *vpc) ipv6BlockOf(p netip.Prefix) *ipv6Block {
	for i := range v.IPv6Blocks {
		if b := &v.IPv6Blocks[i]; b.CIDR.Contains(p.Addr()) && p.Bits() >= b.CIDR.Bits() {
			return b
		}
	}
	return nil
}

// AddVPCIPv6Block associates an IPv6 /56 with a VPC, as AssociateVpcCidrBlock does, and returns the
// association id; an empty cidr asks for an Amazon-provided one. Blocks are unique in the region.
func (s *Sim) AddVPCIPv6Block(vpcID, cidr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.addVPCIPv6BlockLocked(vpcID, cidr)
	if err != nil {
		return "", err
	}
	return b.AssociationID, nil
}

func (s *Sim) addVPCIPv6BlockLocked(vpcID, cidr string) (ipv6Block, error) {
	v := s.vpcs[vpcID]
	if v == nil {
		return ipv6Block{}, fmt.Errorf("adding IPv6 block to VPC %s: %w", vpcID, ErrNotFound)
	}
	if len(v.IPv6Blocks) >= maxVPCIPv6Blocks {
		return ipv6Block{}, fmt.Errorf("adding IPv6 block to VPC %s: the VPC has %d IPv6 blocks already: %w", vpcID, len(v.IPv6Blocks), ErrInvalid)
	}
	var p netip.Prefix
	if cidr == "" {
		p = s.amazonIPv6BlockLocked(vpcID)
	} else {
		var err error
		p, err = netip.ParsePrefix(cidr)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != 56 {
			return ipv6Block{}, fmt.Errorf("adding IPv6 block to VPC %s: %q (an IPv6 /56): %w", vpcID, cidr, ErrInvalid)
		}
		p = p.Masked()
		if o := s.ipv6BlockOwnerLocked(p); o != "" {
			return ipv6Block{}, fmt.Errorf("adding IPv6 block %s to VPC %s: VPC %s holds it: %w", p, vpcID, o, ErrExists)
		}
	}
	b := ipv6Block{AssociationID: associationID(vpcID, p), CIDR: p}
	v.IPv6Blocks = append(v.IPv6Blocks, b)
	s.log.Info("vpc ipv6 block associated", "vpc", vpcID, "cidr", p, "association", b.AssociationID)
	return b, nil
}

// ipv6BlockOwnerLocked is the VPC holding a block that overlaps p, or "".
func (s *Sim) ipv6BlockOwnerLocked(p netip.Prefix) string {
	for _, v := range s.vpcs {
		for _, b := range v.IPv6Blocks {
			if b.CIDR.Overlaps(p) {
				return v.ID
			}
		}
	}
	return ""
}

// amazonIPv6BlockLocked picks a free /56 of amazonIPv6Pool, derived from the VPC id so that it does not
// draw from the random source that names ENIs and MACs.
func (s *Sim) amazonIPv6BlockLocked(vpcID string) netip.Prefix {
	h := fnv.New64a()
	h.Write([]byte(vpcID))
	for n := h.Sum64(); ; n++ {
		b := amazonIPv6Pool.Addr().As16()
		binary.BigEndian.PutUint16(b[4:6], uint16(n>>8))
		b[6] = byte(n)
		if p := netip.PrefixFrom(netip.AddrFrom16(b), 56); s.ipv6BlockOwnerLocked(p) == "" {
			return p
		}
	}
}

// AddSubnetIPv6Block associates an IPv6 /64 out of one of its VPC's IPv6 blocks with a subnet, as
// AssociateSubnetCidrBlock does, and returns the association id. A subnet holds one.
func (s *Sim) AddSubnetIPv6Block(subnetID, cidr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.subnets[subnetID]
	if sn == nil {
		return "", fmt.Errorf("adding IPv6 block to subnet %s: %w", subnetID, ErrNotFound)
	}
	sv, aerr := s.subnetIPv6Locked(sn.ID, sn.VPCID, cidr)
	if aerr != nil {
		return "", fmt.Errorf("adding IPv6 block to subnet %s: %s: %w", subnetID, aerr.Message, ErrInvalid)
	}
	sn.IPv6 = sv
	s.log.Info("subnet ipv6 block associated", "subnet", subnetID, "cidr", sv.CIDR, "association", sv.AssociationID)
	return sv.AssociationID, nil
}

// subnetIPv6Locked checks that cidr may become subnetID's /64 in vpcID, answering EC2's error when not; the
// caller installs it.
func (s *Sim) subnetIPv6Locked(subnetID, vpcID, cidr string) (*subnetIPv6, *APIError) {
	if sn := s.subnets[subnetID]; sn != nil && sn.IPv6 != nil {
		return nil, apiErr(CodeInvalidParameterValue, "The subnet %s already has the IPv6 CIDR block %s; a subnet holds one.", subnetID, sn.IPv6.CIDR)
	}
	p, err := netip.ParsePrefix(cidr)
	v := s.vpcs[vpcID]
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != 64 || v == nil || v.ipv6BlockOf(p.Masked()) == nil {
		return nil, apiErr(CodeInvalidSubnetRange, "The IPv6 CIDR '%s' is invalid.", clip(cidr))
	}
	p = p.Masked()
	for _, o := range s.subnets {
		if o.IPv6 != nil && o.IPv6.CIDR == p {
			return nil, apiErr(CodeInvalidSubnetConflict, "The CIDR '%s' conflicts with another subnet", p)
		}
	}
	return newSubnetIPv6(s.cfg.Seed, subnetID, p), nil
}

// ipv6OwnerLocked is the ENI that holds the IPv6 address a (as an address or inside a prefix), or nil.
func (s *Sim) ipv6OwnerLocked(a netip.Addr) *eni {
	for _, sn := range s.subnets {
		if sn.IPv6 != nil {
			if e := sn.IPv6.ownerOf(a); e != nil {
				return e
			}
		}
	}
	return nil
}
