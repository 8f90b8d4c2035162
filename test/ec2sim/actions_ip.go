package ec2sim

import (
	"net/netip"
	"strconv"
	"strings"
)

// AssignPrivateIpAddresses, UnassignPrivateIpAddresses, CreateTags and DeleteTags. Like the other
// handlers they run with s.mu held and validate everything before changing anything.

type assignResponse struct {
	meta
	NetworkInterfaceID string       `xml:"networkInterfaceId"`
	AssignedIPs        []assignedIP `xml:"assignedPrivateIpAddressesSet>item"`
	AssignedPrefixes   []xmlPrefix  `xml:"assignedIpv4PrefixSet>item"`
}

type assignedIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
}

func (s *Sim) assignPrivateIPAddresses(r *request) (response, *APIError) {
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	count, hasCount, err := r.int("SecondaryPrivateIpAddressCount", 1, maxIPv4PerENI)
	if err != nil {
		return nil, err
	}
	prefixCount, hasPrefixCount, err := r.int("Ipv4PrefixCount", 1, maxIPv4PerENI)
	if err != nil {
		return nil, err
	}
	reassign, _, err := r.bool("AllowReassignment")
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for i, v := range r.list("PrivateIpAddress") {
		a, err := parseIPv4("PrivateIpAddress."+strconv.Itoa(i+1), v)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	var prefixes []netip.Prefix
	for i, v := range r.list("Ipv4Prefix") {
		p, err := parsePrefix28("Ipv4Prefix."+strconv.Itoa(i+1), v)
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, p)
	}
	if hasCount && len(addrs) > 0 || hasPrefixCount && len(prefixes) > 0 {
		return nil, apiErr(CodeInvalidParameterCombination, "You must specify either the IP addresses or the IP address count in the request, not both.")
	}
	if !hasCount && len(addrs) == 0 && !hasPrefixCount && len(prefixes) == 0 {
		return nil, apiErr(CodeMissingParameter, "You must specify either the IP addresses or the IP address count in the request.")
	}
	sn := s.subnets[e.SubnetID]
	// Addresses already on this ENI are no-ops; others must be free or (with AllowReassignment) movable.
	var fresh []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if seen[a] || e.hasIP(a) >= 0 {
			continue
		}
		seen[a] = true
		if !sn.CIDR.Contains(a) {
			return nil, apiErr(CodeInvalidParameterValue, "Address %s does not fall within the subnet's address range", a)
		}
		if !sn.isFree(a) {
			owner := s.ipOwner[a]
			if !reassign || owner == nil || owner.IPs[0].V == a {
				return nil, apiErr(CodePrivateIPAddressInUse, "The specified address %s is already in use.", a)
			}
		}
		fresh = append(fresh, a)
	}
	if hasPrefixCount || len(prefixes) > 0 {
		if inst := s.attachedInstanceLocked(e); inst != nil && !instanceTypes[inst.Type].Nitro() {
			return nil, errPrefixesUnsupported(inst.Type)
		}
	}
	if e.slots()+count+len(fresh)+prefixCount+len(prefixes) > s.ipLimitLocked(e) {
		return nil, apiErr(CodePrivateIPAddressLimit, "Number of private addresses will exceed limit.")
	}
	if err := checkPrefixes(sn, prefixes); err != nil {
		return nil, err
	}
	if sn.Assignable()-sn.assignableAmong(fresh, prefixes) < count {
		return nil, apiErr(CodeInsufficientFreeAddresses, "The specified subnet does not have enough free addresses to satisfy the request.")
	}
	prefixes, err = takePrefixes(sn, hasPrefixCount, prefixCount, prefixes, count)
	if err != nil {
		return nil, err
	}
	now := s.clk.Now()
	for _, a := range fresh {
		if owner := s.ipOwner[a]; owner != nil {
			s.removeIPLocked(owner, a)
			s.emit(IPsUnassigned{InstanceID: eventInstance(owner), ENIID: owner.ID, IPs: []string{a.String()}})
		}
		sn.take(a)
	}
	fresh = append(fresh, sn.allocate(count)...)
	s.addIPsLocked(e, fresh, now)
	resp := &assignResponse{NetworkInterfaceID: e.ID}
	ev := IPsAssigned{InstanceID: eventInstance(e), ENIID: e.ID}
	for _, a := range fresh {
		resp.AssignedIPs = append(resp.AssignedIPs, assignedIP{PrivateIPAddress: a.String()})
		ev.IPs = append(ev.IPs, a.String())
	}
	for _, p := range prefixes {
		e.Prefixes = append(e.Prefixes, stamped[netip.Prefix]{V: p, Since: now})
		resp.AssignedPrefixes = append(resp.AssignedPrefixes, xmlPrefix{Ipv4Prefix: p.String()})
		ev.Prefixes = append(ev.Prefixes, p.String())
	}
	if len(ev.IPs)+len(ev.Prefixes) > 0 {
		s.emit(ev)
	}
	return resp, nil
}

func (s *Sim) unassignPrivateIPAddresses(r *request) (response, *APIError) {
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	ips, prefixes := r.list("PrivateIpAddress"), r.list("Ipv4Prefix")
	if len(ips) == 0 && len(prefixes) == 0 {
		return nil, apiErr(CodeMissingParameter, "You must specify either the IP addresses or the IPv4 prefixes to unassign.")
	}
	var addrs []netip.Addr
	for i, v := range ips {
		a, err := parseIPv4("PrivateIpAddress."+strconv.Itoa(i+1), v)
		if err != nil {
			return nil, err
		}
		idx := e.hasIP(a)
		if idx == 0 {
			return nil, apiErr(CodeInvalidParameterValue, "The primary private IP address %s of %s cannot be unassigned.", a, e.ID)
		}
		if idx < 0 {
			return nil, apiErr(CodeInvalidParameterValue, "Some of the specified addresses are not assigned to interface %s", e.ID)
		}
		addrs = append(addrs, a)
	}
	var drop []netip.Prefix
	for i, v := range prefixes {
		p, err := parsePrefix28("Ipv4Prefix."+strconv.Itoa(i+1), v)
		if err != nil {
			return nil, err
		}
		found := false
		for _, q := range e.Prefixes {
			found = found || q.V == p
		}
		if !found {
			return nil, apiErr(CodeInvalidParameterValue, "Some of the specified prefixes are not assigned to interface %s", e.ID)
		}
		drop = append(drop, p)
	}
	ev := IPsUnassigned{InstanceID: eventInstance(e), ENIID: e.ID}
	now := s.clk.Now()
	for _, a := range addrs {
		if e.hasIP(a) > 0 {
			s.removeIPLocked(e, a)
			ev.IPs = append(ev.IPs, a.String())
			e.Unassigned = append(e.Unassigned, stamped[netip.Addr]{V: a, Since: now})
		}
	}
	sn := s.subnets[e.SubnetID]
	for _, p := range drop {
		for i, q := range e.Prefixes {
			if q.V == p {
				e.Prefixes = append(e.Prefixes[:i], e.Prefixes[i+1:]...)
				sn.releasePrefix(p)
				ev.Prefixes = append(ev.Prefixes, p.String())
				break
			}
		}
	}
	s.emit(ev)
	return ok()
}

// changeTags is CreateTags and DeleteTags on ENIs, subnets, instances, VPCs and security groups.
func (s *Sim) changeTags(r *request, create bool) (response, *APIError) {
	ids := r.list("ResourceId")
	if len(ids) == 0 {
		return nil, errMissing("ResourceId.1")
	}
	tags, err := r.tags("Tag", create)
	if err != nil {
		return nil, err
	}
	if create && len(tags) == 0 {
		return nil, errMissing("Tag.1.Key")
	}
	var targets []map[string]string
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "eni-"):
			e, err := s.findENILocked(id)
			if err != nil {
				return nil, err
			}
			targets = append(targets, e.Tags)
		case strings.HasPrefix(id, "subnet-"):
			sn := s.subnets[id]
			if sn == nil {
				return nil, apiErr(CodeInvalidSubnetIDNotFound, "The subnet ID '%s' does not exist", clip(id))
			}
			targets = append(targets, sn.Tags)
		case strings.HasPrefix(id, "i-"):
			inst := s.instances[id]
			if inst == nil {
				return nil, errInstanceNotFound(clip(id))
			}
			targets = append(targets, inst.Tags)
		case strings.HasPrefix(id, "vpc-"):
			v := s.vpcs[id]
			if v == nil {
				return nil, errVPCNotFound(clip(id))
			}
			targets = append(targets, v.Tags)
		case strings.HasPrefix(id, "sg-"):
			g := s.groups[id]
			if g == nil {
				return nil, errGroupNotFound(clip(id))
			}
			targets = append(targets, g.Tags)
		default:
			return nil, apiErr("InvalidID", "The ID '%s' is not valid", clip(id))
		}
	}
	for _, m := range targets {
		if create {
			for _, t := range tags {
				m[t.Key] = t.Value
			}
			continue
		}
		if len(tags) == 0 {
			clear(m)
		}
		for i, t := range tags {
			_, hasValue := r.p["Tag."+strconv.Itoa(r.indexes("Tag")[i])+".Value"]
			if v, ok := m[t.Key]; ok && (!hasValue || v == t.Value) {
				delete(m, t.Key)
			}
		}
	}
	return ok()
}
