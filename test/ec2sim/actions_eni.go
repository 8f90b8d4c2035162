package ec2sim

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"sort"
	"strconv"
)

// The mutating ENI actions. Every handler runs with s.mu held and validates everything before it changes
// anything, so a failed call leaves no trace.

type createENIResponse struct {
	meta
	NetworkInterface xmlENI `xml:"networkInterface"`
	ClientToken      string `xml:"clientToken,omitempty"`
}

type attachResponse struct {
	meta
	AttachmentID     string `xml:"attachmentId"`
	NetworkCardIndex int    `xml:"networkCardIndex"`
}

func ok() (response, *APIError) { return &returnResponse{Return: true}, nil }

// findENILocked resolves an ENI id the caller may see (eventual consistency hides new ones).
func (s *Sim) findENILocked(id string) (*eni, *APIError) {
	if e := checkID(reENI, CodeInvalidENIIDMalformed, id, "eni"); e != nil {
		return nil, e
	}
	e := s.enis[id]
	if e == nil || s.clk.Now().Before(e.VisibleAt) {
		return nil, errENINotFound(id)
	}
	return e, nil
}

func (s *Sim) requiredENI(r *request) (*eni, *APIError) {
	id, err := r.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	return s.findENILocked(id)
}

func (s *Sim) groupsParam(r *request) ([]string, *APIError) {
	groups := r.list("SecurityGroupId")
	for _, g := range groups {
		if e := checkID(reGroup, CodeInvalidGroupIDMalformed, g, "sg"); e != nil {
			return nil, e
		}
	}
	return groups, nil
}

// paramHash identifies a request's parameters for ClientToken replay.
func paramHash(r *request) string {
	keys := make([]string, 0, len(r.p))
	for k := range r.p {
		if k != "ClientToken" && k != "Version" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k + "=" + r.p[k] + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Sim) createNetworkInterface(r *request) (response, *APIError) {
	subnetID, err := r.required("SubnetId")
	if err != nil {
		return nil, err
	}
	token := r.str("ClientToken")
	if len(token) > 64 {
		return nil, apiErr(CodeInvalidParameterValue, "The client token must be at most 64 characters long.")
	}
	if token != "" {
		if prev := s.tokens[token]; prev != nil {
			if prev.hash != paramHash(r) {
				return nil, apiErr(CodeIdempotentParameterMismatch, "The request uses the same client token as a previous, but non-identical request. Do not reuse a client token with different requests, unless the requests are identical.")
			}
			cp := *prev.resp
			return &cp, nil
		}
	}
	if e := checkID(reSubnet, "InvalidSubnetID.Malformed", subnetID, "subnet"); e != nil {
		return nil, e
	}
	sn := s.subnets[subnetID]
	if sn == nil {
		return nil, errSubnetNotFound(subnetID)
	}
	desc := r.str("Description")
	if len(desc) > 255 {
		return nil, apiErr(CodeInvalidParameterValue, "The description must be at most 255 characters long.")
	}
	if t := r.str("InterfaceType"); t != "" && t != "interface" {
		return nil, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for InterfaceType.", clip(t))
	}
	groups, err := s.groupsParam(r)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		groups = []string{s.vpcs[sn.VPCID].SG}
	}
	if err := s.checkENIGroupsLocked(groups, sn.VPCID, func(quota int) *APIError {
		// CreateNetworkInterface words the quota so (aws/amazon-vpc-resource-controller-k8s#583).
		return apiErr(CodeInvalidParameterValue, "user %s exceeded limit %d on the number of interface security group memberships", s.cfg.AccountID, quota)
	}); err != nil {
		return nil, err
	}
	// Addresses: an optional primary, explicit secondaries, a count; prefixes explicit or counted.
	var primary netip.Addr
	var explicit []netip.Addr
	if v := r.str("PrivateIpAddress"); v != "" {
		a, err := parseIPv4("PrivateIpAddress", v)
		if err != nil {
			return nil, err
		}
		primary = a
	}
	for _, n := range r.indexes("PrivateIpAddresses") {
		pre := "PrivateIpAddresses." + strconv.Itoa(n)
		a, err := parseIPv4(pre+".PrivateIpAddress", r.str(pre+".PrivateIpAddress"))
		if err != nil {
			return nil, err
		}
		isPrimary, _, err := r.bool(pre + ".Primary")
		if err != nil {
			return nil, err
		}
		switch {
		case isPrimary && primary.IsValid() && primary != a:
			return nil, apiErr(CodeInvalidParameterCombination, "Only one primary private IP address can be specified.")
		case isPrimary:
			primary = a
		default:
			explicit = append(explicit, a)
		}
	}
	count, hasCount, err := r.int("SecondaryPrivateIpAddressCount", 1, maxIPv4PerENI)
	if err != nil {
		return nil, err
	}
	prefixCount, hasPrefixCount, err := r.int("Ipv4PrefixCount", 1, maxIPv4PerENI)
	if err != nil {
		return nil, err
	}
	var prefixes []netip.Prefix
	for _, n := range r.indexes("Ipv4Prefix") {
		name := "Ipv4Prefix." + strconv.Itoa(n) + ".Ipv4Prefix"
		p, err := parsePrefix28(name, r.str(name))
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, p)
	}
	if hasCount && len(explicit) > 0 || hasPrefixCount && (len(prefixes) > 0 || hasCount || len(explicit) > 0) ||
		len(prefixes) > 0 && (hasCount || len(explicit) > 0) {
		return nil, apiErr(CodeInvalidParameterCombination, "You may specify either secondary private IP addresses (a list or a count) or IPv4 prefixes (a list or a count), not more than one of these.")
	}
	if 1+count+len(explicit)+prefixCount+len(prefixes) > maxIPv4PerENI {
		return nil, apiErr(CodePrivateIPAddressLimit, "Number of private addresses will exceed limit.")
	}
	if err := checkAddrs(sn, append([]netip.Addr{primary}, explicit...)); err != nil {
		return nil, err
	}
	if err := checkPrefixes(sn, prefixes); err != nil {
		return nil, err
	}
	need := count
	if !primary.IsValid() {
		need++
	}
	if sn.Assignable()-sn.assignableAmong(explicit, prefixes) < need {
		return nil, apiErr(CodeInsufficientFreeAddresses, "The specified subnet does not have enough free addresses to satisfy the request.")
	}
	an, av := listParam(r, "Ipv6Addresses", "Ipv6Address")
	pn, pv := listParam(r, "Ipv6Prefix", "Ipv6Prefix")
	ask6, err := readIPv6Ask(r, an, av, pn, pv)
	if err != nil {
		return nil, err
	}
	var addrs6 []netip.Addr
	var prefixes6 []netip.Prefix
	if !ask6.empty() {
		if addrs6, prefixes6, err = s.checkIPv6AskLocked(sn, nil, "the new network interface", ask6, maxIPv6PerENI); err != nil {
			return nil, err
		}
	}
	tags, err := tagSpecs(r, "network-interface")
	if err != nil {
		return nil, err
	}
	prefixes, err = takePrefixes(sn, hasPrefixCount, prefixCount, prefixes, need)
	if err != nil {
		return nil, err
	}
	now := s.clk.Now()
	e := s.newENILocked(sn, groups, desc, now)
	if primary.IsValid() {
		sn.take(primary)
		s.addIPsLocked(e, []netip.Addr{primary}, now)
	} else {
		s.addIPsLocked(e, sn.allocate(1), now)
	}
	for _, a := range explicit {
		sn.take(a)
	}
	s.addIPsLocked(e, explicit, now)
	s.addIPsLocked(e, sn.allocate(count), now)
	for _, p := range prefixes {
		e.Prefixes = append(e.Prefixes, stamped[netip.Prefix]{V: p, Since: now})
	}
	if !ask6.empty() {
		s.giveIPv6Locked(sn, e, addrs6, prefixes6, ask6.addrCount, now)
	}
	for _, t := range tags {
		e.Tags[t.Key] = t.Value
	}
	e.VisibleAt = now.Add(s.faults.visibilityDelay())
	resp := &createENIResponse{NetworkInterface: s.eniXML(e), ClientToken: token}
	if token != "" {
		cp := *resp
		s.tokens[token] = &tokenEntry{hash: paramHash(r), resp: &cp}
	}
	s.log.Info("eni created", "eni", e.ID, "subnet", sn.ID, "ips", len(e.IPs), "prefixes", len(e.Prefixes))
	return resp, nil
}

// checkAddrs: each valid address lies in the subnet, is free and appears once.
func checkAddrs(sn *subnet, addrs []netip.Addr) *APIError {
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		if !sn.CIDR.Contains(a) {
			return apiErr(CodeInvalidParameterValue, "Address %s does not fall within the subnet's address range", a)
		}
		if seen[a] || !sn.isFree(a) {
			return apiErr(CodeInvalidIPAddressInUse, "Address %s is in use.", a)
		}
		seen[a] = true
	}
	return nil
}

func checkPrefixes(sn *subnet, ps []netip.Prefix) *APIError {
	seen := map[netip.Prefix]bool{}
	for _, p := range ps {
		if !sn.CIDR.Contains(p.Addr()) {
			return apiErr(CodeInvalidParameterValue, "Prefix %s does not fall within the subnet's address range", p)
		}
		if seen[p] || !sn.prefixFree(p) {
			return apiErr(CodeInvalidParameterValue, "Prefix %s is in use or overlaps addresses in use.", p)
		}
		seen[p] = true
	}
	return nil
}

// takePrefixes takes a request's /28s from sn: prefixCount fresh ones when byCount, else the listed ones,
// which checkPrefixes has found free. Prefixes by count are checked last and may still fail on
// fragmentation, so callers take them before any address; addrsNeeded is how many addresses the call takes
// afterwards, which the prefixes must leave free.
func takePrefixes(sn *subnet, byCount bool, prefixCount int, listed []netip.Prefix, addrsNeeded int) ([]netip.Prefix, *APIError) {
	if !byCount {
		for _, p := range listed {
			sn.takePrefix(p)
		}
		return listed, nil
	}
	if sn.Free()-addrsNeeded < 16*prefixCount {
		return nil, apiErr(CodeInvalidParameterValue, "There aren't sufficient free Ipv4 addresses or prefixes")
	}
	got := sn.allocatePrefixes(prefixCount)
	if got == nil {
		return nil, apiErr(CodeInsufficientCidrBlocks, "The specified subnet does not have enough contiguous free address space to satisfy the request.")
	}
	return got, nil
}

// tagSpecs reads TagSpecification.N for a resource of type resourceType, the only type the action tags.
func tagSpecs(r *request, resourceType string) ([]tag, *APIError) {
	var out []tag
	for _, n := range r.indexes("TagSpecification") {
		pre := "TagSpecification." + strconv.Itoa(n)
		if rt := r.str(pre + ".ResourceType"); rt != resourceType {
			return nil, apiErr(CodeInvalidParameterValue, "'%s' is not a valid taggable resource type for this operation.", clip(rt))
		}
		tags, err := r.tags(pre+".Tag", true)
		if err != nil {
			return nil, err
		}
		out = append(out, tags...)
	}
	return out, nil
}

func (s *Sim) attachNetworkInterface(r *request) (response, *APIError) {
	for _, name := range []string{"NetworkInterfaceId", "InstanceId", "DeviceIndex"} {
		if _, err := r.required(name); err != nil {
			return nil, err
		}
	}
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	instID := r.str("InstanceId")
	devIdx, _, err := r.int("DeviceIndex", 0, 255)
	if err != nil {
		return nil, err
	}
	card, _, err := r.int("NetworkCardIndex", 0, 255)
	if err != nil {
		return nil, err
	}
	if e := checkID(reInstance, CodeInvalidInstanceIDMalformed, instID, "i"); e != nil {
		return nil, e
	}
	inst := s.instances[instID]
	if inst == nil {
		return nil, errInstanceNotFound(instID)
	}
	if inst.State != "running" {
		return nil, apiErr("IncorrectInstanceState", "The instance '%s' is not in a valid state for this operation.", instID)
	}
	if e.Att != nil {
		return nil, apiErr(CodeInvalidNetworkInterfaceInUse, "Interface: [%s] in use.", e.ID)
	}
	if e.AZ != inst.AZ || e.VPCID != inst.VPCID {
		return nil, apiErr(CodeInvalidParameterCombination, "You may not attach a network interface to an instance if they are not in the same availability zone")
	}
	it := instanceTypes[inst.Type]
	if card >= len(it.Cards) {
		return nil, apiErr(CodeInvalidParameterValue, "Network card index %d is not valid for instance type %s.", card, inst.Type)
	}
	count := 1
	for _, o := range inst.attached {
		if o.Att.CardIdx == card {
			count++
		}
	}
	if count > it.Cards[card] {
		return nil, apiErr(CodeAttachmentLimitExceeded, "Interface count %d exceeds the limit for %s", count, inst.Type)
	}
	for _, o := range inst.attached {
		if o.Att.CardIdx == card && o.Att.DeviceIndex == devIdx {
			return nil, apiErr(CodeInvalidParameterValue, "Instance '%s' already has an interface attached at device index '%d'.", instID, devIdx)
		}
	}
	if len(e.Prefixes)+len(e.IPv6Prefixes) > 0 && !it.Nitro() {
		return nil, errPrefixesUnsupported(inst.Type)
	}
	if e.slots() > it.IPv4PerENI {
		return nil, apiErr(CodePrivateIPAddressLimit, "Number of private addresses will exceed limit.")
	}
	if e.ipv6Slots() > it.IPv6PerENI {
		return nil, apiErr(CodePrivateIPAddressLimit, "Number of IPv6 addresses will exceed limit.")
	}
	a := s.startAttachLocked(e, inst, devIdx, card)
	return &attachResponse{AttachmentID: a.ID, NetworkCardIndex: card}, nil
}

func (s *Sim) detachNetworkInterface(r *request) (response, *APIError) {
	id, err := r.required("AttachmentId")
	if err != nil {
		return nil, err
	}
	if _, _, err := r.bool("Force"); err != nil {
		return nil, err
	}
	e := s.attachments[id]
	if e == nil {
		return nil, errAttachmentNotFound(id)
	}
	if e.Att.DeviceIndex == 0 && e.Att.CardIdx == 0 {
		return nil, apiErr(CodeOperationNotPermitted, "The network interface at device index 0 and networkCard index 0 cannot be detached.")
	}
	s.startDetachLocked(e)
	return ok()
}

func (s *Sim) deleteNetworkInterface(r *request) (response, *APIError) {
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	if e.Att != nil {
		return nil, apiErr(CodeInvalidParameterValue, "Network interface '%s' is currently in use.", e.ID)
	}
	s.deleteENILocked(e)
	return ok()
}

func (s *Sim) modifyNetworkInterfaceAttribute(r *request) (response, *APIError) {
	e, err := s.requiredENI(r)
	if err != nil {
		return nil, err
	}
	attID, hasAtt := r.p["Attachment.AttachmentId"]
	dot, hasDot, err := r.bool("Attachment.DeleteOnTermination")
	if err != nil {
		return nil, err
	}
	sdc, hasSDC, err := r.bool("SourceDestCheck.Value")
	if err != nil {
		return nil, err
	}
	desc, hasDesc := r.p["Description.Value"]
	groups, err := s.groupsParam(r)
	if err != nil {
		return nil, err
	}
	if !hasAtt && !hasDot && !hasSDC && !hasDesc && len(groups) == 0 {
		return nil, apiErr(CodeInvalidParameterCombination, "No attributes specified.")
	}
	if hasDot && !hasAtt {
		return nil, errMissing("Attachment.AttachmentId")
	}
	if hasAtt {
		if e.Att == nil || e.Att.ID != attID {
			return nil, errAttachmentNotFound(attID)
		}
	}
	if len(desc) > 255 {
		return nil, apiErr(CodeInvalidParameterValue, "The description must be at most 255 characters long.")
	}
	if len(groups) > 0 {
		if err := s.checkENIGroupsLocked(groups, e.VPCID, func(int) *APIError {
			return apiErr(CodeSecurityGroupsPerInterfaceLimit, "The maximum number of security groups per interface has been reached.")
		}); err != nil {
			return nil, err
		}
	}
	if hasDot {
		e.Att.DeleteOnTermination = dot
	}
	if hasSDC {
		e.SourceDestCheck = sdc
	}
	if hasDesc {
		e.Description = desc
	}
	if len(groups) > 0 {
		e.Groups = groups
		s.emit(ENISecurityGroupsChanged{InstanceID: eventInstance(e), ENIID: e.ID, Groups: slices.Clone(groups)})
		s.log.Info("eni security groups set", "eni", e.ID, "groups", groups)
	}
	return ok()
}
