package ec2sim

import (
	"sort"
	"strconv"
)

// DescribeVpcs and DescribeSecurityGroups: ids, filters and pages as the other describes.

type xmlCIDRBlockState struct {
	State string `xml:"state"`
}

type xmlCIDRBlockAssociation struct {
	AssociationID  string            `xml:"associationId"`
	CidrBlock      string            `xml:"cidrBlock"`
	CidrBlockState xmlCIDRBlockState `xml:"cidrBlockState"`
}

type xmlVPC struct {
	VpcID                       string                    `xml:"vpcId"`
	OwnerID                     string                    `xml:"ownerId"`
	State                       string                    `xml:"state"`
	CidrBlock                   string                    `xml:"cidrBlock"`
	CidrBlockAssociationSet     []xmlCIDRBlockAssociation `xml:"cidrBlockAssociationSet>item"`
	Ipv6CidrBlockAssociationSet []xmlIPv6BlockAssociation `xml:"ipv6CidrBlockAssociationSet>item"`
	DhcpOptionsID               string                    `xml:"dhcpOptionsId"`
	InstanceTenancy             string                    `xml:"instanceTenancy"`
	IsDefault                   bool                      `xml:"isDefault"`
	Tags                        []xmlTag                  `xml:"tagSet>item"`
}

type describeVpcsResponse struct {
	meta
	Vpcs      []xmlVPC `xml:"vpcSet>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

// blockAttr is a filter attribute of a VPC's IPv4 blocks, ipv6BlockAttr of its IPv6 blocks.
func blockAttr(get func(cidrBlock) string) attrFunc[*vpc] {
	return vpcBlocksAttr(func(v *vpc) []cidrBlock { return v.Blocks }, get)
}

func ipv6BlockAttr(get func(ipv6Block) string) attrFunc[*vpc] {
	return vpcBlocksAttr(func(v *vpc) []ipv6Block { return v.IPv6Blocks }, get)
}

func vpcBlocksAttr[B any](blocks func(*vpc) []B, get func(B) string) attrFunc[*vpc] {
	return func(v *vpc) []string {
		bs := blocks(v)
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = get(b)
		}
		return out
	}
}

var vpcAttrs = map[string]attrFunc[*vpc]{
	"vpc-id":                                func(v *vpc) []string { return one(v.ID) },
	"cidr":                                  func(v *vpc) []string { return one(v.CIDR.String()) },
	"state":                                 func(*vpc) []string { return one("available") },
	"is-default":                            func(*vpc) []string { return one("false") },
	"cidr-block-association.cidr-block":     blockAttr(func(b cidrBlock) string { return b.CIDR.String() }),
	"cidr-block-association.association-id": blockAttr(func(b cidrBlock) string { return b.AssociationID }),
	"cidr-block-association.state":          blockAttr(func(cidrBlock) string { return "associated" }),
	"ipv6-cidr-block-association.ipv6-cidr-block": ipv6BlockAttr(func(b ipv6Block) string { return b.CIDR.String() }),
	"ipv6-cidr-block-association.association-id":  ipv6BlockAttr(func(b ipv6Block) string { return b.AssociationID }),
	"ipv6-cidr-block-association.ipv6-pool":       ipv6BlockAttr(func(ipv6Block) string { return "Amazon" }),
	"ipv6-cidr-block-association.state":           ipv6BlockAttr(func(ipv6Block) string { return "associated" }),
}

func (s *Sim) describeVpcs(r *request) (response, *APIError) {
	ids := r.list("VpcId")
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	attrs := map[string]attrFunc[*vpc]{"owner-id": func(*vpc) []string { return one(s.cfg.AccountID) }}
	for k, f := range vpcAttrs {
		attrs[k] = f
	}
	match, err := compileFilters(fs, attrs, func(v *vpc) map[string]string { return v.Tags })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "vpc", 5, 1000)
	if err != nil {
		return nil, err
	}
	var cands []*vpc
	if len(ids) > 0 {
		seen := map[string]bool{}
		for _, id := range ids {
			v := s.vpcs[id]
			if v == nil {
				return nil, errVPCNotFound(clip(id))
			}
			if !seen[id] {
				seen[id] = true
				cands = append(cands, v)
			}
		}
	} else {
		for _, v := range s.vpcs {
			cands = append(cands, v)
		}
	}
	var out []*vpc
	for _, v := range cands {
		if match(v) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	keys := make([]string, len(out))
	for i, v := range out {
		keys[i] = v.ID
	}
	lo, hi, next := pg.page(keys)
	resp := &describeVpcsResponse{NextToken: next}
	for _, v := range out[lo:hi] {
		x := xmlVPC{VpcID: v.ID, OwnerID: s.cfg.AccountID, State: "available", CidrBlock: v.CIDR.String(),
			DhcpOptionsID: "dopt-0e1a1e00000000001", InstanceTenancy: "default", Tags: sortedTags(v.Tags)}
		for _, b := range v.Blocks {
			x.CidrBlockAssociationSet = append(x.CidrBlockAssociationSet, xmlCIDRBlockAssociation{
				AssociationID: b.AssociationID, CidrBlock: b.CIDR.String(), CidrBlockState: xmlCIDRBlockState{State: "associated"}})
		}
		for _, b := range v.IPv6Blocks {
			x.Ipv6CidrBlockAssociationSet = append(x.Ipv6CidrBlockAssociationSet, s.vpcIPv6XML(b, "associated"))
		}
		resp.Vpcs = append(resp.Vpcs, x)
	}
	return resp, nil
}

type xmlSecurityGroup struct {
	OwnerID             string            `xml:"ownerId"`
	GroupID             string            `xml:"groupId"`
	GroupName           string            `xml:"groupName"`
	GroupDescription    string            `xml:"groupDescription"`
	VpcID               string            `xml:"vpcId"`
	SecurityGroupArn    string            `xml:"securityGroupArn"`
	IPPermissions       []xmlIPPermission `xml:"ipPermissions>item"`
	IPPermissionsEgress []xmlIPPermission `xml:"ipPermissionsEgress>item"`
	Tags                []xmlTag          `xml:"tagSet>item"`
}

type describeSecurityGroupsResponse struct {
	meta
	SecurityGroups []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken      string             `xml:"nextToken,omitempty"`
}

var groupAttrs = func() map[string]attrFunc[*secGroup] {
	m := map[string]attrFunc[*secGroup]{
		"group-id":    func(g *secGroup) []string { return one(g.ID) },
		"group-name":  func(g *secGroup) []string { return one(g.Name) },
		"vpc-id":      func(g *secGroup) []string { return one(g.VPCID) },
		"description": func(g *secGroup) []string { return one(g.Description) },
	}
	// The rule filters, ingress as ip-permission.*, egress as egress.ip-permission.*.
	for prefix, egress := range map[string]bool{"ip-permission.": false, "egress.ip-permission.": true} {
		for name, get := range map[string]func(rule) string{
			"protocol":  func(x rule) string { return x.Protocol },
			"from-port": func(x rule) string { f, _ := rulePorts(x); return strconv.Itoa(f) },
			"to-port":   func(x rule) string { _, t := rulePorts(x); return strconv.Itoa(t) },
			"cidr":      func(x rule) string { return cidrOf(x, true) },
			"ipv6-cidr": func(x rule) string { return cidrOf(x, false) },
			"group-id":  func(x rule) string { return x.Group },
		} {
			m[prefix+name] = func(g *secGroup) []string {
				var out []string
				for _, x := range g.Rules {
					if v := get(x); x.Egress == egress && v != "" {
						out = append(out, v)
					}
				}
				return out
			}
		}
	}
	return m
}()

func (s *Sim) describeSecurityGroups(r *request) (response, *APIError) {
	ids, names := r.list("GroupId"), r.list("GroupName")
	if len(ids)+len(names) > 0 && r.has("MaxResults") {
		return nil, apiErr(CodeInvalidParameterCombination, "The parameter groupIds cannot be used with the parameter maxResults")
	}
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	attrs := map[string]attrFunc[*secGroup]{"owner-id": func(*secGroup) []string { return one(s.cfg.AccountID) }}
	for k, f := range groupAttrs {
		attrs[k] = f
	}
	match, err := compileFilters(fs, attrs, func(g *secGroup) map[string]string { return g.Tags })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "sg", 5, 1000)
	if err != nil {
		return nil, err
	}
	var cands []*secGroup
	seen := map[string]bool{}
	add := func(g *secGroup) {
		if !seen[g.ID] {
			seen[g.ID] = true
			cands = append(cands, g)
		}
	}
	for _, id := range ids {
		if e := checkID(reGroup, CodeInvalidGroupIDMalformed, id, "sg"); e != nil {
			return nil, e
		}
		g := s.groups[id]
		if g == nil {
			return nil, errGroupNotFound(clip(id))
		}
		add(g)
	}
	if len(names) > 0 {
		// Names select groups of the account's default VPC only, and the simulator's VPCs are not default ones.
		return nil, apiErr(CodeInvalidGroupNotFound, "The security group '%s' does not exist", clip(names[0]))
	}
	if len(ids) == 0 {
		for _, g := range s.groups {
			add(g)
		}
	}
	var out []*secGroup
	for _, g := range cands {
		if match(g) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	keys := make([]string, len(out))
	for i, g := range out {
		keys[i] = g.ID
	}
	lo, hi, next := pg.page(keys)
	resp := &describeSecurityGroupsResponse{NextToken: next}
	for _, g := range out[lo:hi] {
		resp.SecurityGroups = append(resp.SecurityGroups, xmlSecurityGroup{OwnerID: s.cfg.AccountID, GroupID: g.ID,
			GroupName: g.Name, GroupDescription: g.Description, VpcID: g.VPCID, SecurityGroupArn: s.groupARN(g.ID),
			IPPermissions: s.permissionsXML(g.Rules, false), IPPermissionsEgress: s.permissionsXML(g.Rules, true),
			Tags: sortedTags(g.Tags)})
	}
	return resp, nil
}
