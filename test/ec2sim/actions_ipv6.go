package ec2sim

import (
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// AssignIpv6Addresses, UnassignIpv6Addresses, AssociateVpcCidrBlock and AssociateSubnetCidrBlock, and the
// IPv6 part of CreateNetworkInterface. Like the other handlers they run with s.mu held and validate
// everything before changing anything.

type assignIPv6Response struct {
	meta
	NetworkInterfaceID string   `xml:"networkInterfaceId"`
	AssignedIPv6s      []string `xml:"assignedIpv6Addresses>item"`
	AssignedPrefixes   []string `xml:"assignedIpv6PrefixSet>item"`
}

type unassignIPv6Response struct {
	meta
	NetworkInterfaceID string   `xml:"networkInterfaceId"`
	UnassignedIPv6s    []string `xml:"unassignedIpv6Addresses>item"`
	UnassignedPrefixes []string `xml:"unassignedIpv6PrefixSet>item"`
}

// ipv6Ask is what a call asks of a subnet's /64: addresses and /80 prefixes, each by count or by name.
type ipv6Ask struct {
	addrCount, prefixCount       int
	hasAddrCount, hasPrefixCount bool
	addrs                        []netip.Addr
	prefixes                     []netip.Prefix
}

func (a ipv6Ask) empty() bool {
	return !a.hasAddrCount && !a.hasPrefixCount && len(a.addrs) == 0 && len(a.prefixes) == 0
}

func (a ipv6Ask) wantsPrefixes() bool { return a.hasPrefixCount || len(a.prefixes) > 0 }

// readIPv6Ask reads the counts and the named addresses and prefixes (their parameter names and values);
// a count together with a list of the same kind is refused.
func readIPv6Ask(r *request, addrNames, addrValues, prefixNames, prefixValues []string) (ipv6Ask, *APIError) {
	var a ipv6Ask
	var err *APIError
	if a.addrCount, a.hasAddrCount, err = r.int("Ipv6AddressCount", 1, maxIPv6PerENI); err != nil {
		return a, err
	}
	if a.prefixCount, a.hasPrefixCount, err = r.int("Ipv6PrefixCount", 1, maxIPv6PerENI); err != nil {
		return a, err
	}
	for i, v := range addrValues {
		ip, err := netip.ParseAddr(v)
		if err != nil || !ip.Is6() || ip.Is4In6() || ip.Zone() != "" {
			return a, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected an IPv6 address.", clip(v), addrNames[i])
		}
		a.addrs = append(a.addrs, ip)
	}
	for i, v := range prefixValues {
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != 80 || p.Masked() != p {
			return a, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected an IPv6 /80 prefix.", clip(v), prefixNames[i])
		}
		a.prefixes = append(a.prefixes, p)
	}
	if a.hasAddrCount && len(a.addrs) > 0 || a.hasPrefixCount && len(a.prefixes) > 0 {
		return a, apiErr(CodeInvalidParameterCombination, "You may specify either IPv6 addresses or an IPv6 address count, and either IPv6 prefixes or an IPv6 prefix count, not both.")
	}
	return a, nil
}

// listParam returns the names and values of the list parameter prefix.N (with suffix: prefix.N.suffix).
func listParam(r *request, prefix, suffix string) (names, values []string) {
	for _, n := range r.indexes(prefix) {
		name := prefix + "." + strconv.Itoa(n)
		if suffix != "" {
			name += "." + suffix
		}
		if v, ok := r.p[name]; ok {
			names, values = append(names, name), append(values, v)
		}
	}
	return names, values
}

// checkIPv6AskLocked checks an ask against e's subnet (e is nil for a new ENI) and the limit of slots
// (addresses and prefixes) e may hold. It returns the named addresses e does not hold yet, and the named
// prefixes e does not hold yet with those it picks for a count; nothing is taken yet.
func (s *Sim) checkIPv6AskLocked(sn *subnet, e *eni, what string, ask ipv6Ask, limit int) ([]netip.Addr, []netip.Prefix, *APIError) {
	sv := sn.IPv6
	if sv == nil {
		return nil, nil, apiErr(CodeInvalidParameterValue, "The subnet %s of %s has no IPv6 CIDR block.", sn.ID, what)
	}
	var addrs []netip.Addr
	for _, a := range ask.addrs {
		switch {
		case slices.Contains(addrs, a) || e != nil && sv.addrs[a] == e:
			continue
		case !sv.CIDR.Contains(a):
			return nil, nil, apiErr(CodeInvalidParameterValue, "Address %s does not fall within the subnet's IPv6 address range %s", a, sv.CIDR)
		case reserved(a):
			return nil, nil, apiErr(CodeInvalidParameterValue, "Address %s is reserved by AWS.", a)
		case !sv.addrFree(a):
			return nil, nil, apiErr(CodeInvalidIPAddressInUse, "Address %s is in use.", a)
		}
		addrs = append(addrs, a)
	}
	var prefixes []netip.Prefix
	for _, p := range ask.prefixes {
		switch {
		case slices.Contains(prefixes, p) || e != nil && sv.prefixes[p] == e:
			continue
		case !sv.CIDR.Contains(p.Addr()):
			return nil, nil, apiErr(CodeInvalidParameterValue, "Prefix %s does not fall within the subnet's IPv6 address range %s", p, sv.CIDR)
		case !sv.prefixFree(p) || slices.ContainsFunc(addrs, p.Contains):
			return nil, nil, apiErr(CodeInvalidParameterValue, "Prefix %s is in use or overlaps addresses in use.", p)
		}
		prefixes = append(prefixes, p)
	}
	held := 0
	if e != nil {
		held = e.ipv6Slots()
	}
	if held+ask.addrCount+len(addrs)+ask.prefixCount+len(prefixes) > limit {
		return nil, nil, apiErr(CodePrivateIPAddressLimit, "Number of IPv6 addresses will exceed limit.")
	}
	if ask.hasPrefixCount {
		picked := sv.pickPrefixes(ask.prefixCount, addrs)
		if picked == nil {
			return nil, nil, apiErr(CodeInsufficientCidrBlocks, "The specified subnet does not have enough contiguous free address space to satisfy the request.")
		}
		prefixes = append(prefixes, picked...)
	}
	return addrs, prefixes, nil
}

// giveIPv6Locked hands e the checked prefixes and addresses, then count more addresses, and returns the
// addresses it got.
func (s *Sim) giveIPv6Locked(sn *subnet, e *eni, addrs []netip.Addr, prefixes []netip.Prefix, count int, now time.Time) []netip.Addr {
	sv := sn.IPv6
	for _, p := range prefixes {
		sv.prefixes[p] = e
		e.IPv6Prefixes = append(e.IPv6Prefixes, stamped[netip.Prefix]{V: p, Since: now})
	}
	for _, a := range addrs {
		sv.takeAddr(a, e)
	}
	addrs = append(addrs, sv.allocateAddrs(count, e)...)
	for _, a := range addrs {
		e.IPv6s = append(e.IPv6s, stamped[netip.Addr]{V: a, Since: now})
	}
	return addrs
}

func (e *eni) ipv6Slots() int { return len(e.IPv6s) + len(e.IPv6Prefixes) }

// ipv6LimitLocked is the number of IPv6 slots (addresses + prefixes) the ENI may hold: its instance type's
// Ipv6AddressesPerInterface when attached, else the largest any type allows.
func (s *Sim) ipv6LimitLocked(e *eni) int {
	if inst := s.attachedInstanceLocked(e); inst != nil {
		return instanceTypes[inst.Type].IPv6PerENI
	}
	return maxIPv6PerENI
}

func (s *Sim) assignIPv6Addresses(r *request) (response, *APIError) {
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	an, av := listParam(r, "Ipv6Addresses", "")
	pn, pv := listParam(r, "Ipv6Prefix", "")
	ask, err := readIPv6Ask(r, an, av, pn, pv)
	if err != nil {
		return nil, err
	}
	if ask.empty() {
		return nil, apiErr(CodeMissingParameter, "You must specify either the IPv6 addresses or the IPv6 address count, or the IPv6 prefixes or the IPv6 prefix count, in the request.")
	}
	if inst := s.attachedInstanceLocked(e); ask.wantsPrefixes() && inst != nil && !instanceTypes[inst.Type].Nitro() {
		return nil, errPrefixesUnsupported(inst.Type)
	}
	sn := s.subnets[e.SubnetID]
	addrs, prefixes, err := s.checkIPv6AskLocked(sn, e, "network interface "+e.ID, ask, s.ipv6LimitLocked(e))
	if err != nil {
		return nil, err
	}
	addrs = s.giveIPv6Locked(sn, e, addrs, prefixes, ask.addrCount, s.clk.Now())
	resp := &assignIPv6Response{NetworkInterfaceID: e.ID, AssignedIPv6s: addrStrings(addrs), AssignedPrefixes: prefixList(prefixes)}
	if len(addrs)+len(prefixes) > 0 {
		s.emit(IPsAssigned{InstanceID: eventInstance(e), ENIID: e.ID, IPv6s: resp.AssignedIPv6s, IPv6Prefixes: resp.AssignedPrefixes})
	}
	return resp, nil
}

func (s *Sim) unassignIPv6Addresses(r *request) (response, *APIError) {
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	an, av := listParam(r, "Ipv6Addresses", "")
	pn, pv := listParam(r, "Ipv6Prefix", "")
	if len(av)+len(pv) == 0 {
		return nil, apiErr(CodeMissingParameter, "You must specify either the IPv6 addresses or the IPv6 prefixes to unassign.")
	}
	ask, err := readIPv6Ask(r, an, av, pn, pv)
	if err != nil {
		return nil, err
	}
	sv := s.subnets[e.SubnetID].IPv6
	for _, a := range ask.addrs {
		if sv == nil || sv.addrs[a] != e {
			return nil, apiErr(CodeInvalidParameterValue, "Some of the specified addresses are not assigned to interface %s", e.ID)
		}
	}
	for _, p := range ask.prefixes {
		if sv == nil || sv.prefixes[p] != e {
			return nil, apiErr(CodeInvalidParameterValue, "Some of the specified prefixes are not assigned to interface %s", e.ID)
		}
	}
	resp := &unassignIPv6Response{NetworkInterfaceID: e.ID}
	for _, a := range ask.addrs {
		if sv.addrs[a] == e {
			sv.releaseAddr(a)
			e.IPv6s = slices.DeleteFunc(e.IPv6s, func(x stamped[netip.Addr]) bool { return x.V == a })
			resp.UnassignedIPv6s = append(resp.UnassignedIPv6s, a.String())
		}
	}
	for _, p := range ask.prefixes {
		if sv.prefixes[p] == e {
			delete(sv.prefixes, p)
			e.IPv6Prefixes = slices.DeleteFunc(e.IPv6Prefixes, func(x stamped[netip.Prefix]) bool { return x.V == p })
			resp.UnassignedPrefixes = append(resp.UnassignedPrefixes, p.String())
		}
	}
	s.emit(IPsUnassigned{InstanceID: eventInstance(e), ENIID: e.ID, IPv6s: resp.UnassignedIPv6s, IPv6Prefixes: resp.UnassignedPrefixes})
	return resp, nil
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func prefixList(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

type xmlIPv6BlockAssociation struct {
	AssociationID      string            `xml:"associationId"`
	Ipv6CidrBlock      string            `xml:"ipv6CidrBlock"`
	Ipv6CidrBlockState xmlCIDRBlockState `xml:"ipv6CidrBlockState"`
	NetworkBorderGroup string            `xml:"networkBorderGroup,omitempty"`
	Ipv6Pool           string            `xml:"ipv6Pool,omitempty"`
}

type associateVpcCidrBlockResponse struct {
	meta
	VpcID                    string                  `xml:"vpcId"`
	Ipv6CidrBlockAssociation xmlIPv6BlockAssociation `xml:"ipv6CidrBlockAssociation"`
}

type associateSubnetCidrBlockResponse struct {
	meta
	SubnetID                 string                  `xml:"subnetId"`
	Ipv6CidrBlockAssociation xmlIPv6BlockAssociation `xml:"ipv6CidrBlockAssociation"`
}

func (s *Sim) vpcIPv6XML(b ipv6Block, state string) xmlIPv6BlockAssociation {
	return xmlIPv6BlockAssociation{AssociationID: b.AssociationID, Ipv6CidrBlock: b.CIDR.String(),
		Ipv6CidrBlockState: xmlCIDRBlockState{State: state}, NetworkBorderGroup: s.cfg.Region, Ipv6Pool: "Amazon"}
}

func subnetIPv6XML(sv *subnetIPv6, state string) xmlIPv6BlockAssociation {
	return xmlIPv6BlockAssociation{AssociationID: sv.AssociationID, Ipv6CidrBlock: sv.CIDR.String(),
		Ipv6CidrBlockState: xmlCIDRBlockState{State: state}}
}

// associateVpcCidrBlock associates an Amazon-provided IPv6 /56 (the simulator does not model IPv4 blocks,
// pools or IPAM here).
func (s *Sim) associateVpcCidrBlock(r *request) (response, *APIError) {
	id, err := r.required("VpcId")
	if err != nil {
		return nil, err
	}
	amazon, _, err := r.bool("AmazonProvidedIpv6CidrBlock")
	if err != nil {
		return nil, err
	}
	if g := r.str("Ipv6CidrBlockNetworkBorderGroup"); g != "" && g != s.cfg.Region {
		return nil, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for Ipv6CidrBlockNetworkBorderGroup.", clip(g))
	}
	if !amazon {
		return nil, errMissing("AmazonProvidedIpv6CidrBlock")
	}
	if s.vpcs[id] == nil {
		return nil, errVPCNotFound(clip(id))
	}
	b, gerr := s.addVPCIPv6BlockLocked(id, "")
	if gerr != nil {
		return nil, apiErr(CodeCidrLimitExceeded, "The VPC %s has reached its limit of %d IPv6 CIDR blocks.", id, maxVPCIPv6Blocks)
	}
	return &associateVpcCidrBlockResponse{VpcID: id, Ipv6CidrBlockAssociation: s.vpcIPv6XML(b, "associating")}, nil
}

func (s *Sim) associateSubnetCidrBlock(r *request) (response, *APIError) {
	id, err := r.required("SubnetId")
	if err != nil {
		return nil, err
	}
	cidr, err := r.required("Ipv6CidrBlock")
	if err != nil {
		return nil, err
	}
	sn := s.subnets[id]
	if sn == nil {
		return nil, errSubnetNotFound(clip(id))
	}
	sv, err := s.subnetIPv6Locked(sn.ID, sn.VPCID, cidr)
	if err != nil {
		return nil, err
	}
	sn.IPv6 = sv
	s.log.Info("subnet ipv6 block associated", "subnet", id, "cidr", sv.CIDR, "association", sv.AssociationID)
	return &associateSubnetCidrBlockResponse{SubnetID: id, Ipv6CidrBlockAssociation: subnetIPv6XML(sv, "associating")}, nil
}
