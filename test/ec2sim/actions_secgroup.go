package ec2sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The security group actions: CreateSecurityGroup, DeleteSecurityGroup, and Authorize/Revoke of ingress
// and egress rules as IpPermissions (or, for ingress, the older top-level parameters). Like the ENI
// actions, each runs with s.mu held and checks everything before it changes anything.

type createSecurityGroupResponse struct {
	meta
	GroupID          string   `xml:"groupId"`
	SecurityGroupArn string   `xml:"securityGroupArn"`
	Tags             []xmlTag `xml:"tagSet>item"`
}

type deleteSecurityGroupResponse struct {
	meta
	Return  bool   `xml:"return"`
	GroupID string `xml:"groupId"`
}

type authorizeResponse struct {
	meta
	Return bool                   `xml:"return"`
	Rules  []xmlSecurityGroupRule `xml:"securityGroupRuleSet>item"`
}

type revokeResponse struct {
	meta
	Return  bool             `xml:"return"`
	Revoked []xmlRevokedRule `xml:"revokedSecurityGroupRuleSet>item"`
}

type xmlReferencedGroup struct {
	GroupID string `xml:"groupId"`
	UserID  string `xml:"userId"`
}

type xmlSecurityGroupRule struct {
	SecurityGroupRuleID  string              `xml:"securityGroupRuleId"`
	GroupID              string              `xml:"groupId"`
	GroupOwnerID         string              `xml:"groupOwnerId"`
	IsEgress             bool                `xml:"isEgress"`
	IPProtocol           string              `xml:"ipProtocol"`
	FromPort             int                 `xml:"fromPort"`
	ToPort               int                 `xml:"toPort"`
	CidrIPv4             string              `xml:"cidrIpv4,omitempty"`
	CidrIPv6             string              `xml:"cidrIpv6,omitempty"`
	ReferencedGroupInfo  *xmlReferencedGroup `xml:"referencedGroupInfo,omitempty"`
	Description          string              `xml:"description,omitempty"`
	SecurityGroupRuleArn string              `xml:"securityGroupRuleArn"`
	Tags                 []xmlTag            `xml:"tagSet>item"`
}

type xmlRevokedRule struct {
	SecurityGroupRuleID string `xml:"securityGroupRuleId"`
	GroupID             string `xml:"groupId"`
	IsEgress            bool   `xml:"isEgress"`
	IPProtocol          string `xml:"ipProtocol"`
	FromPort            int    `xml:"fromPort"`
	ToPort              int    `xml:"toPort"`
	CidrIPv4            string `xml:"cidrIpv4,omitempty"`
	CidrIPv6            string `xml:"cidrIpv6,omitempty"`
	ReferencedGroupID   string `xml:"referencedGroupId,omitempty"`
	Description         string `xml:"description,omitempty"`
}

// The IpPermission shapes of DescribeSecurityGroups.
type xmlIPRange struct {
	CidrIP      string `xml:"cidrIp"`
	Description string `xml:"description,omitempty"`
}

type xmlIPv6Range struct {
	CidrIPv6    string `xml:"cidrIpv6"`
	Description string `xml:"description,omitempty"`
}

type xmlGroupPair struct {
	UserID      string `xml:"userId"`
	GroupID     string `xml:"groupId"`
	Description string `xml:"description,omitempty"`
}

type xmlIPPermission struct {
	IPProtocol string         `xml:"ipProtocol"`
	FromPort   *int           `xml:"fromPort,omitempty"`
	ToPort     *int           `xml:"toPort,omitempty"`
	Groups     []xmlGroupPair `xml:"groups>item"`
	IPRanges   []xmlIPRange   `xml:"ipRanges>item"`
	IPv6Ranges []xmlIPv6Range `xml:"ipv6Ranges>item"`
}

func (s *Sim) groupARN(id string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", s.cfg.Region, s.cfg.AccountID, id)
}

func (s *Sim) createSecurityGroup(r *request) (response, *APIError) {
	name, err := r.required("GroupName")
	if err != nil {
		return nil, err
	}
	desc, err := r.required("GroupDescription")
	if err != nil {
		return nil, err
	}
	vpcID := r.str("VpcId")
	if vpcID == "" {
		return nil, apiErr(CodeVPCIDNotSpecified, "No default VPC for this user. GroupName is only supported for EC2-Classic and default VPC.")
	}
	v := s.vpcs[vpcID]
	if v == nil {
		return nil, errVPCNotFound(clip(vpcID))
	}
	if len(name) > 255 || len(desc) > 255 {
		return nil, apiErr(CodeInvalidParameterValue, "Group names and descriptions must be at most 255 characters long.")
	}
	if strings.HasPrefix(strings.ToLower(name), "sg-") {
		return nil, apiErr(CodeInvalidParameterValue, "Group names may not be in the format sg-*.")
	}
	if s.groupNamedLocked(vpcID, name) != nil {
		return nil, apiErr(CodeInvalidGroupDuplicate, "The security group '%s' already exists for VPC '%s'", clip(name), vpcID)
	}
	tags, err := tagSpecs(r, "security-group")
	if err != nil {
		return nil, err
	}
	g := &secGroup{ID: s.newID("sg", func(x string) bool { return s.groups[x] != nil }), VPCID: vpcID, Name: name,
		Description: desc, Tags: map[string]string{}}
	for _, t := range tags {
		g.Tags[t.Key] = t.Value
	}
	// As EC2 makes it: no ingress rule, and every protocol out to anywhere (IPv6 too in a VPC that has it).
	out := Permission{Protocol: ProtocolAll, CIDRs: []string{"0.0.0.0/0"}}
	if len(v.IPv6Blocks) > 0 {
		out.CIDRs = append(out.CIDRs, "::/0")
	}
	if err := s.addGroupLocked(g, SecurityGroupRules{Egress: []Permission{out}}); err != nil {
		return nil, err
	}
	return &createSecurityGroupResponse{GroupID: g.ID, SecurityGroupArn: s.groupARN(g.ID), Tags: sortedTags(g.Tags)}, nil
}

// deleteSecurityGroup refuses a group an ENI carries or another group's rule names with
// DependencyViolation, as EC2-VPC does (InvalidGroup.InUse was EC2-Classic's code).
func (s *Sim) deleteSecurityGroup(r *request) (response, *APIError) {
	g, err := s.groupParamLocked(r)
	if err != nil {
		return nil, err
	}
	if s.isDefaultGroup(g) {
		return nil, apiErr(CodeCannotDelete, "the specified group: \"%s\" name: \"%s\" cannot be deleted by a user", g.ID, g.Name)
	}
	if s.groupInUseLocked(g) {
		return nil, apiErr(CodeDependencyViolation, "resource %s has a dependent object", g.ID)
	}
	s.removeRulesLocked(g, func(rule) bool { return true })
	delete(s.groups, g.ID)
	s.emitGroupLocked(g, true)
	s.log.Info("security group deleted", "group", g.ID, "vpc", g.VPCID)
	return &deleteSecurityGroupResponse{Return: true, GroupID: g.ID}, nil
}

func (s *Sim) authorizeSecurityGroup(r *request, egress bool) (response, *APIError) {
	g, err := s.groupParamLocked(r)
	if err != nil {
		return nil, err
	}
	asks, err := permissionAsks(r, !egress)
	if err != nil {
		return nil, err
	}
	if len(asks) == 0 {
		return nil, errMissing("IpPermissions")
	}
	tags, err := tagSpecs(r, "security-group-rule")
	if err != nil {
		return nil, err
	}
	var add []rule
	for _, a := range asks {
		rs, err := s.rulesOfLocked(g, egress, a)
		if err != nil {
			return nil, err
		}
		add = append(add, rs...)
	}
	if err := g.admit(add); err != nil {
		return nil, err
	}
	added := s.appendRulesLocked(g, add, tags)
	s.emitGroupLocked(g, false)
	s.log.Info("security group rules authorized", "group", g.ID, "egress", egress, "rules", len(added))
	resp := &authorizeResponse{Return: true}
	for _, x := range added {
		resp.Rules = append(resp.Rules, s.ruleXML(g, x))
	}
	return resp, nil
}

// revokeSecurityGroup takes rules out by rule id or by IpPermissions. In a VPC that is not a default one
// (none of the simulator's is), a rule that does not match exactly fails the whole call with
// InvalidPermission.NotFound and revokes nothing.
func (s *Sim) revokeSecurityGroup(r *request, egress bool) (response, *APIError) {
	g, err := s.groupParamLocked(r)
	if err != nil {
		return nil, err
	}
	ids := r.list("SecurityGroupRuleId")
	asks, err := permissionAsks(r, !egress)
	if err != nil {
		return nil, err
	}
	switch {
	case len(ids) == 0 && len(asks) == 0:
		return nil, errMissing("IpPermissions")
	case len(ids) > 0 && len(asks) > 0:
		return nil, apiErr(CodeInvalidParameterCombination, "You may specify either security group rule ids or IP permissions, not both.")
	}
	gone := map[string]bool{}
	for _, id := range ids {
		i := slices.IndexFunc(g.Rules, func(x rule) bool { return x.ID == id && x.Egress == egress })
		if i < 0 {
			return nil, apiErr(CodeInvalidSecurityGroupRuleIDNotFound, "The security group rule ID '%s' does not exist", clip(id))
		}
		gone[id] = true
	}
	for _, a := range asks {
		rs, err := s.rulesOfLocked(g, egress, a)
		if err != nil {
			return nil, err
		}
		for _, x := range rs {
			i := g.index(x.match())
			if i < 0 {
				return nil, apiErr(CodeInvalidPermissionNotFound, "The specified rule does not exist in this security group.")
			}
			gone[g.Rules[i].ID] = true
		}
	}
	revoked := s.removeRulesLocked(g, func(x rule) bool { return gone[x.ID] })
	s.emitGroupLocked(g, false)
	s.log.Info("security group rules revoked", "group", g.ID, "egress", egress, "rules", len(revoked))
	resp := &revokeResponse{Return: true}
	for _, x := range revoked {
		from, to := rulePorts(x)
		resp.Revoked = append(resp.Revoked, xmlRevokedRule{SecurityGroupRuleID: x.ID, GroupID: g.ID, IsEgress: x.Egress,
			IPProtocol: x.Protocol, FromPort: from, ToPort: to, CidrIPv4: cidrOf(x, true), CidrIPv6: cidrOf(x, false),
			ReferencedGroupID: x.Group, Description: x.Description})
	}
	return resp, nil
}

// groupParamLocked is the group a request names by GroupId; a GroupName resolves only in a default VPC.
func (s *Sim) groupParamLocked(r *request) (*secGroup, *APIError) {
	if id := r.str("GroupId"); id != "" {
		if e := checkID(reGroup, CodeInvalidGroupIDMalformed, id, "sg"); e != nil {
			return nil, e
		}
		g := s.groups[id]
		if g == nil {
			return nil, errGroupNotFound(id)
		}
		return g, nil
	}
	if name := r.str("GroupName"); name != "" {
		return nil, errGroupNameOutsideDefaultVPC(name)
	}
	return nil, apiErr(CodeMissingParameter, "The request must contain the parameter groupName or groupId")
}

// permissionAsks reads IpPermissions.N and, when topLevel, the older single permission of IpProtocol,
// FromPort, ToPort, CidrIp and SourceSecurityGroupName (ingress only; the two forms do not mix).
func permissionAsks(r *request, topLevel bool) ([]permissionAsk, *APIError) {
	var out []permissionAsk
	for _, n := range r.indexes("IpPermissions") {
		pre := "IpPermissions." + strconv.Itoa(n)
		a, err := permissionAskAt(r, pre+".")
		if err != nil {
			return nil, err
		}
		if a.cidrs4, err = peerList(r, pre+".IpRanges", "CidrIp"); err != nil {
			return nil, err
		}
		if a.cidrs6, err = peerList(r, pre+".Ipv6Ranges", "CidrIpv6"); err != nil {
			return nil, err
		}
		for _, m := range r.indexes(pre + ".Groups") {
			gp := pre + ".Groups." + strconv.Itoa(m)
			switch id, name := r.str(gp+".GroupId"), r.str(gp+".GroupName"); {
			case id != "":
				a.groups = append(a.groups, peerAsk{value: id, description: r.str(gp + ".Description")})
			case name != "":
				a.groupNames = append(a.groupNames, name)
			default:
				return nil, errMissing(gp + ".GroupId")
			}
		}
		out = append(out, a)
	}
	if !topLevel || !slices.ContainsFunc(topLevelPermissionParams, r.has) {
		return out, nil
	}
	if len(out) > 0 {
		return nil, apiErr(CodeInvalidParameterCombination, "The parameter IpPermissions cannot be used with the parameters IpProtocol, FromPort, ToPort, CidrIp or SourceSecurityGroupName.")
	}
	a, err := permissionAskAt(r, "")
	if err != nil {
		return nil, err
	}
	if c := r.str("CidrIp"); c != "" {
		a.cidrs4 = []peerAsk{{value: c}}
	}
	if name := r.str("SourceSecurityGroupName"); name != "" {
		a.groupNames = []string{name}
	}
	return []permissionAsk{a}, nil
}

// permissionAskAt reads the protocol and ports of a permission whose parameters start with pre.
func permissionAskAt(r *request, pre string) (permissionAsk, *APIError) {
	a := permissionAsk{protocol: r.str(pre + "IpProtocol")}
	if a.protocol == "" {
		return a, errMissing(pre + "IpProtocol")
	}
	var err *APIError
	if a.fromPort, err = r.optionalInt(pre + "FromPort"); err != nil {
		return a, err
	}
	if a.toPort, err = r.optionalInt(pre + "ToPort"); err != nil {
		return a, err
	}
	return a, nil
}

// peerList reads prefix.N.<field> (a CIDR) with its optional description.
func peerList(r *request, prefix, field string) ([]peerAsk, *APIError) {
	var out []peerAsk
	for _, n := range r.indexes(prefix) {
		pre := prefix + "." + strconv.Itoa(n)
		v, err := r.required(pre + "." + field)
		if err != nil {
			return nil, err
		}
		out = append(out, peerAsk{value: v, description: r.str(pre + ".Description")})
	}
	return out, nil
}

// optionalInt reads an integer that may be absent (nil).
func (r *request) optionalInt(name string) (*int, *APIError) {
	v, ok := r.p[name]
	if !ok {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected an integer.", clip(v), name)
	}
	return &n, nil
}

// rulePorts are a rule's ports as a security group rule states them: -1 for protocols without ports.
func rulePorts(x rule) (int, int) {
	if hasPorts(x.Protocol) {
		return x.FromPort, x.ToPort
	}
	return -1, -1
}

func cidrOf(x rule, ipv4 bool) string {
	if x.CIDR.IsValid() && x.CIDR.Addr().Is4() == ipv4 {
		return x.CIDR.String()
	}
	return ""
}

func (s *Sim) ruleXML(g *secGroup, x rule) xmlSecurityGroupRule {
	from, to := rulePorts(x)
	out := xmlSecurityGroupRule{SecurityGroupRuleID: x.ID, GroupID: g.ID, GroupOwnerID: s.cfg.AccountID, IsEgress: x.Egress,
		IPProtocol: x.Protocol, FromPort: from, ToPort: to, CidrIPv4: cidrOf(x, true), CidrIPv6: cidrOf(x, false),
		Description: x.Description, Tags: sortedTags(x.Tags),
		SecurityGroupRuleArn: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group-rule/%s", s.cfg.Region, s.cfg.AccountID, x.ID)}
	if x.Group != "" {
		out.ReferencedGroupInfo = &xmlReferencedGroup{GroupID: x.Group, UserID: s.cfg.AccountID}
	}
	return out
}

// permissionsXML is one direction of a group's rules as DescribeSecurityGroups answers them. A protocol
// without ports has neither fromPort nor toPort.
func (s *Sim) permissionsXML(rules []rule, egress bool) []xmlIPPermission {
	var out []xmlIPPermission
	for _, rs := range groupRules(rules, egress) {
		p := xmlIPPermission{IPProtocol: rs.protocol}
		if hasPorts(rs.protocol) {
			p.FromPort, p.ToPort = &rs.fromPort, &rs.toPort
		}
		for _, x := range rs.rules {
			switch {
			case x.Group != "":
				p.Groups = append(p.Groups, xmlGroupPair{UserID: s.cfg.AccountID, GroupID: x.Group, Description: x.Description})
			case x.CIDR.Addr().Is4():
				p.IPRanges = append(p.IPRanges, xmlIPRange{CidrIP: x.CIDR.String(), Description: x.Description})
			default:
				p.IPv6Ranges = append(p.IPv6Ranges, xmlIPv6Range{CidrIPv6: x.CIDR.String(), Description: x.Description})
			}
		}
		out = append(out, p)
	}
	return out
}
