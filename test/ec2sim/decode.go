package ec2sim

import (
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// request is one decoded EC2 Query call: the action and its flattened, 1-based parameters.
type request struct {
	Action string
	p      map[string]string
}

const maxListIndex = 10000

// commonParams are accepted by every action (and the SigV4 query parameters of presigned GETs).
var commonParams = []string{"Action", "Version", "DryRun", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date",
	"X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token", "AWSAccessKeyId",
	"SignatureMethod", "SignatureVersion", "Signature", "Timestamp"}

var filterParams = []string{"Filter.N.Name", "Filter.N.Value.N", "MaxResults", "NextToken"}

var tagSpecParams = []string{"TagSpecification.N.ResourceType", "TagSpecification.N.Tag.N.Key", "TagSpecification.N.Tag.N.Value"}

// permissionParams are IpPermissions.N as the SDK and the AWS CLI send them (UserIdGroupPairs go as Groups).
var permissionParams = []string{"IpPermissions.N.IpProtocol", "IpPermissions.N.FromPort", "IpPermissions.N.ToPort",
	"IpPermissions.N.IpRanges.N.CidrIp", "IpPermissions.N.IpRanges.N.Description",
	"IpPermissions.N.Ipv6Ranges.N.CidrIpv6", "IpPermissions.N.Ipv6Ranges.N.Description",
	"IpPermissions.N.Groups.N.GroupId", "IpPermissions.N.Groups.N.GroupName", "IpPermissions.N.Groups.N.UserId",
	"IpPermissions.N.Groups.N.Description"}

// topLevelPermissionParams state one ingress permission outside IpPermissions, the older form.
var topLevelPermissionParams = []string{"IpProtocol", "FromPort", "ToPort", "CidrIp", "SourceSecurityGroupName",
	"SourceSecurityGroupOwnerId"}

// actionParams lists, per action, the parameter shapes it takes (list indices written as N).
var actionParams = map[string][]string{
	"CreateNetworkInterface": {"SubnetId", "Description", "SecurityGroupId.N", "SecondaryPrivateIpAddressCount",
		"PrivateIpAddress", "PrivateIpAddresses.N.PrivateIpAddress", "PrivateIpAddresses.N.Primary", "Ipv4PrefixCount",
		"Ipv4Prefix.N.Ipv4Prefix", "TagSpecification.N.ResourceType", "TagSpecification.N.Tag.N.Key",
		"TagSpecification.N.Tag.N.Value", "ClientToken", "InterfaceType", "Ipv6AddressCount", "Ipv6Addresses.N.Ipv6Address",
		"Ipv6PrefixCount", "Ipv6Prefix.N.Ipv6Prefix"},
	"AttachNetworkInterface":          {"NetworkInterfaceId", "InstanceId", "DeviceIndex", "NetworkCardIndex"},
	"DetachNetworkInterface":          {"AttachmentId", "Force"},
	"DeleteNetworkInterface":          {"NetworkInterfaceId"},
	"ModifyNetworkInterfaceAttribute": {"NetworkInterfaceId", "Attachment.AttachmentId", "Attachment.DeleteOnTermination", "SourceDestCheck.Value", "Description.Value", "SecurityGroupId.N"},
	"DescribeNetworkInterfaces":       append([]string{"NetworkInterfaceId.N"}, filterParams...),
	"AssignPrivateIpAddresses":        {"NetworkInterfaceId", "PrivateIpAddress.N", "SecondaryPrivateIpAddressCount", "Ipv4Prefix.N", "Ipv4PrefixCount", "AllowReassignment"},
	"UnassignPrivateIpAddresses":      {"NetworkInterfaceId", "PrivateIpAddress.N", "Ipv4Prefix.N"},
	"AssignIpv6Addresses":             {"NetworkInterfaceId", "Ipv6AddressCount", "Ipv6Addresses.N", "Ipv6PrefixCount", "Ipv6Prefix.N"},
	"UnassignIpv6Addresses":           {"NetworkInterfaceId", "Ipv6Addresses.N", "Ipv6Prefix.N"},
	"AssociateVpcCidrBlock":           {"VpcId", "AmazonProvidedIpv6CidrBlock", "Ipv6CidrBlockNetworkBorderGroup"},
	"AssociateSubnetCidrBlock":        {"SubnetId", "Ipv6CidrBlock"},
	"CreateTags":                      {"ResourceId.N", "Tag.N.Key", "Tag.N.Value"},
	"DeleteTags":                      {"ResourceId.N", "Tag.N.Key", "Tag.N.Value"},
	"DescribeInstances":               append([]string{"InstanceId.N"}, filterParams...),
	"ModifyInstanceMetadataOptions":   {"InstanceId", "HttpPutResponseHopLimit", "HttpTokens"},
	"DescribeInstanceTypes":           append([]string{"InstanceType.N"}, filterParams...),
	"DescribeSubnets":                 append([]string{"SubnetId.N"}, filterParams...),
	"DescribeVpcs":                    append([]string{"VpcId.N"}, filterParams...),
	"DescribeSecurityGroups":          append([]string{"GroupId.N", "GroupName.N"}, filterParams...),
	"CreateSubnetCidrReservation":     append([]string{"SubnetId", "Cidr", "ReservationType", "Description"}, tagSpecParams...),
	"GetSubnetCidrReservations":       append([]string{"SubnetId"}, filterParams...),
	"DeleteSubnetCidrReservation":     {"SubnetCidrReservationId"},
	"CreateSecurityGroup":             append([]string{"GroupName", "GroupDescription", "VpcId"}, tagSpecParams...),
	"DeleteSecurityGroup":             {"GroupId", "GroupName"},
	"AuthorizeSecurityGroupIngress": slices.Concat([]string{"GroupId", "GroupName"}, permissionParams,
		topLevelPermissionParams, tagSpecParams),
	"AuthorizeSecurityGroupEgress": slices.Concat([]string{"GroupId"}, permissionParams, tagSpecParams),
	"RevokeSecurityGroupIngress": slices.Concat([]string{"GroupId", "GroupName", "SecurityGroupRuleId.N"},
		permissionParams, topLevelPermissionParams),
	"RevokeSecurityGroupEgress": slices.Concat([]string{"GroupId", "SecurityGroupRuleId.N"}, permissionParams),
}

var allowedParams = func() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for action, ps := range actionParams {
		m := map[string]bool{}
		for _, p := range append(ps, commonParams...) {
			m[p] = true
		}
		out[action] = m
	}
	return out
}()

// Actions lists the EC2 actions the simulator serves.
func Actions() []string {
	out := make([]string, 0, len(actionParams))
	for a := range actionParams {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// decodeRequest parses a form-encoded body (and any query string) into a request, answering the EC2
// error for a malformed body, a missing or unknown action, a repeated or unknown parameter.
func decodeRequest(body []byte, query url.Values) (*request, *APIError) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, apiErr(CodeMalformedQueryString, "The query string contains a syntax error.")
	}
	for k, v := range query {
		vals[k] = append(vals[k], v...)
	}
	r := &request{p: make(map[string]string, len(vals))}
	for k, v := range vals {
		if len(v) > 1 {
			return nil, apiErr(CodeInvalidParameterValue, "The parameter %s is specified more than once.", clip(k))
		}
		r.p[k] = v[0]
	}
	r.Action = r.p["Action"]
	if r.Action == "" {
		return nil, apiErr(CodeMissingAction, "The request must contain the parameter Action")
	}
	allowed, ok := allowedParams[r.Action]
	if !ok {
		return nil, apiErr(CodeInvalidAction, "The action %s is not valid for this web service.", clip(r.Action))
	}
	for k := range r.p {
		shape, ok := shapeOf(k)
		if !ok || !allowed[shape] {
			return nil, apiErr(CodeUnknownParameter, "The parameter %s is not recognized", clip(k))
		}
	}
	if v, ok := r.p["DryRun"]; ok {
		dry, e := parseBool("DryRun", v)
		if e != nil {
			return nil, e
		}
		if dry {
			return nil, apiErr(CodeDryRunOperation, "Request would have succeeded, but DryRun flag is set.")
		}
	}
	return r, nil
}

// clip keeps echoed user input short.
func clip(s string) string {
	if len(s) > 128 {
		s = s[:128] + "..."
	}
	return strconv.QuoteToASCII(s)[1 : len(strconv.QuoteToASCII(s))-1]
}

// shapeOf replaces every list index of a key by N; indices must be 1..maxListIndex.
func shapeOf(key string) (string, bool) {
	parts := strings.Split(key, ".")
	for i, p := range parts {
		if p == "" {
			return "", false
		}
		if p[0] >= '0' && p[0] <= '9' {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > maxListIndex || p[0] == '0' {
				return "", false
			}
			parts[i] = "N"
		}
	}
	return strings.Join(parts, "."), true
}

func (r *request) has(name string) bool { _, ok := r.p[name]; return ok }

func (r *request) str(name string) string { return r.p[name] }

func (r *request) required(name string) (string, *APIError) {
	v, ok := r.p[name]
	if !ok || v == "" {
		return "", errMissing(name)
	}
	return v, nil
}

// int reads an optional integer in [min, max].
func (r *request) int(name string, min, max int) (int, bool, *APIError) {
	v, ok := r.p[name]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected an integer.", clip(v), name)
	}
	if n < min || n > max {
		return 0, false, apiErr(CodeInvalidParameterValue, "Value (%d) for parameter %s is invalid. Expected a value between %d and %d.", n, name, min, max)
	}
	return n, true, nil
}

func parseBool(name, v string) (bool, *APIError) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected a boolean.", clip(v), name)
}

func (r *request) bool(name string) (bool, bool, *APIError) {
	v, ok := r.p[name]
	if !ok {
		return false, false, nil
	}
	b, err := parseBool(name, v)
	return b, err == nil, err
}

// indexes returns the sorted list indices N present under "prefix.N" or "prefix.N.*".
func (r *request) indexes(prefix string) []int {
	seen := map[int]bool{}
	pre := prefix + "."
	for k := range r.p {
		if !strings.HasPrefix(k, pre) {
			continue
		}
		rest := k[len(pre):]
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[:i]
		}
		if n, err := strconv.Atoi(rest); err == nil {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list returns the values of "prefix.N" in index order.
func (r *request) list(prefix string) []string {
	var out []string
	for _, n := range r.indexes(prefix) {
		if v, ok := r.p[prefix+"."+strconv.Itoa(n)]; ok {
			out = append(out, v)
		}
	}
	return out
}

type filter struct {
	Name   string
	Values []string
}

func (r *request) filters() ([]filter, *APIError) {
	var out []filter
	for _, n := range r.indexes("Filter") {
		pre := "Filter." + strconv.Itoa(n)
		name, ok := r.p[pre+".Name"]
		if !ok || name == "" {
			return nil, errMissing(pre + ".Name")
		}
		out = append(out, filter{Name: name, Values: r.list(pre + ".Value")})
	}
	return out, nil
}

type tag struct{ Key, Value string }

func (r *request) tags(prefix string, needKey bool) ([]tag, *APIError) {
	var out []tag
	for _, n := range r.indexes(prefix) {
		pre := prefix + "." + strconv.Itoa(n)
		k, ok := r.p[pre+".Key"]
		if needKey && (!ok || k == "") {
			return nil, errMissing(pre + ".Key")
		}
		v := r.p[pre+".Value"]
		if len(k) > 128 || len(v) > 256 {
			return nil, apiErr(CodeInvalidParameterValue, "Tag key must be at most 128 and value at most 256 characters long.")
		}
		if needKey && strings.HasPrefix(strings.ToLower(k), "aws:") {
			return nil, apiErr(CodeInvalidParameterValue, "Tag keys starting with 'aws:' are reserved for internal use")
		}
		out = append(out, tag{Key: k, Value: v})
	}
	return out, nil
}

var (
	reENI        = regexp.MustCompile(`^eni-[0-9a-f]{8}([0-9a-f]{9})?$`)
	reInstance   = regexp.MustCompile(`^i-[0-9a-f]{8}([0-9a-f]{9})?$`)
	reSubnet     = regexp.MustCompile(`^subnet-[0-9a-zA-Z]+$`)
	reGroup      = regexp.MustCompile(`^sg-[0-9a-zA-Z]+$`)
	reAttachment = regexp.MustCompile(`^eni-attach-[0-9a-f]{8}([0-9a-f]{9})?$`)
)

func checkID(re *regexp.Regexp, code, id, expect string) *APIError {
	if !re.MatchString(id) {
		return apiErr(code, "Invalid id: \"%s\" (expecting \"%s-...\")", clip(id), expect)
	}
	return nil
}

func parseIPv4(name, v string) (netip.Addr, *APIError) {
	a, err := netip.ParseAddr(v)
	if err != nil || !a.Is4() {
		return netip.Addr{}, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected an IPv4 address.", clip(v), name)
	}
	return a, nil
}

func parsePrefix28(name, v string) (netip.Prefix, *APIError) {
	p, err := netip.ParsePrefix(v)
	if err != nil || !p.Addr().Is4() || p.Bits() != 28 || p.Masked() != p {
		return netip.Prefix{}, apiErr(CodeInvalidParameterValue, "Invalid value '%s' for %s. Expected an IPv4 /28 prefix.", clip(v), name)
	}
	return p, nil
}
