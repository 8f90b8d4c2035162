package ec2sim

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// createGroup makes a security group through the SDK and returns its id.
func (w *world) createGroup(t *testing.T, name string) string {
	t.Helper()
	out, err := w.ec2.CreateSecurityGroup(ctxT(t), &ec2.CreateSecurityGroupInput{GroupName: aws.String(name),
		Description: aws.String(name + " group"), VpcId: aws.String(DefaultVPC)})
	if err != nil {
		t.Fatalf("creating security group %s: %v", name, err)
	}
	return aws.ToString(out.GroupId)
}

func (w *world) describeGroup(t *testing.T, id string) types.SecurityGroup {
	t.Helper()
	out, err := w.ec2.DescribeSecurityGroups(ctxT(t), &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil || len(out.SecurityGroups) != 1 {
		t.Fatalf("describing %s: %v %+v", id, err, out)
	}
	return out.SecurityGroups[0]
}

func (w *world) authorizeIngress(t *testing.T, group string, perms ...types.IpPermission) *ec2.AuthorizeSecurityGroupIngressOutput {
	t.Helper()
	out, err := w.ec2.AuthorizeSecurityGroupIngress(ctxT(t), &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(group),
		IpPermissions: perms})
	if err != nil {
		t.Fatalf("authorizing ingress of %s: %v", group, err)
	}
	return out
}

// tcpFrom is a permission of one TCP port from CIDRs (IPv4 or IPv6) and groups.
func tcpFrom(port int32, peers ...string) types.IpPermission {
	p := types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(port), ToPort: aws.Int32(port)}
	for _, peer := range peers {
		switch {
		case strings.HasPrefix(peer, "sg-"):
			p.UserIdGroupPairs = append(p.UserIdGroupPairs, types.UserIdGroupPair{GroupId: aws.String(peer)})
		case strings.Contains(peer, ":"):
			p.Ipv6Ranges = append(p.Ipv6Ranges, types.Ipv6Range{CidrIpv6: aws.String(peer)})
		default:
			p.IpRanges = append(p.IpRanges, types.IpRange{CidrIp: aws.String(peer)})
		}
	}
	return p
}

// permissionText renders described permissions compactly: "tcp 5432-5432 [sg-...]", "-1 [0.0.0.0/0]".
func permissionText(perms []types.IpPermission) []string {
	var out []string
	for _, p := range perms {
		var peers []string
		for _, r := range p.IpRanges {
			peers = append(peers, aws.ToString(r.CidrIp))
		}
		for _, r := range p.Ipv6Ranges {
			peers = append(peers, aws.ToString(r.CidrIpv6))
		}
		for _, g := range p.UserIdGroupPairs {
			peers = append(peers, aws.ToString(g.GroupId))
		}
		ports := ""
		if p.FromPort != nil || p.ToPort != nil {
			ports = fmt.Sprintf(" %d-%d", aws.ToInt32(p.FromPort), aws.ToInt32(p.ToPort))
		}
		out = append(out, fmt.Sprintf("%s%s %v", aws.ToString(p.IpProtocol), ports, peers))
	}
	return out
}

// rawEC2 posts a form the SDK would refuse to send and returns the EC2 error code answered ("" on success).
func (w *world) rawEC2(t *testing.T, form url.Values) string {
	t.Helper()
	form.Set("Version", "2016-11-15")
	resp, err := http.PostForm(w.srv.EC2URL(), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	var env errorEnvelope
	if err := xml.Unmarshal(b, &env); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return env.Code
}

func TestANewSecurityGroupAdmitsNothingInAndEverythingOut(t *testing.T) {
	t.Run("in an IPv4 VPC the egress rule is 0.0.0.0/0", func(t *testing.T) {
		w := newWorld(t, nil)
		out, err := w.ec2.CreateSecurityGroup(ctxT(t), &ec2.CreateSecurityGroupInput{GroupName: aws.String("db"),
			Description: aws.String("the database"), VpcId: aws.String(DefaultVPC),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSecurityGroup,
				Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("data")}}}}})
		if err != nil {
			t.Fatal(err)
		}
		id := aws.ToString(out.GroupId)
		if !reGroup.MatchString(id) || !strings.HasSuffix(aws.ToString(out.SecurityGroupArn), ":security-group/"+id) ||
			tagMap(out.Tags)["team"] != "data" {
			t.Fatalf("created = %+v", out)
		}
		g := w.describeGroup(t, id)
		if aws.ToString(g.GroupName) != "db" || aws.ToString(g.Description) != "the database" || aws.ToString(g.VpcId) != DefaultVPC ||
			tagMap(g.Tags)["team"] != "data" {
			t.Fatalf("described = %+v", g)
		}
		if len(g.IpPermissions) != 0 {
			t.Errorf("ingress = %v, want none", permissionText(g.IpPermissions))
		}
		if got := permissionText(g.IpPermissionsEgress); !slices.Equal(got, []string{"-1 [0.0.0.0/0]"}) {
			t.Errorf("egress = %v, want [-1 [0.0.0.0/0]]", got)
		}
	})
	t.Run("in a dual-stack VPC the egress rule takes ::/0 too", func(t *testing.T) {
		w := newDualStackWorld(t, nil)
		g := w.describeGroup(t, w.createGroup(t, "db"))
		if got := permissionText(g.IpPermissionsEgress); !slices.Equal(got, []string{"-1 [0.0.0.0/0 ::/0]"}) {
			t.Errorf("egress = %v, want [-1 [0.0.0.0/0 ::/0]]", got)
		}
	})
}

func TestSeededAndDefaultGroupsAdmitAllTraffic(t *testing.T) {
	w := newPodWorld(t)
	for _, id := range []string{w.inst.SecurityGroups[0], PodGroup} {
		g := w.describeGroup(t, id)
		all := []string{"-1 [0.0.0.0/0 ::/0]"}
		if in, out := permissionText(g.IpPermissions), permissionText(g.IpPermissionsEgress); !slices.Equal(in, all) || !slices.Equal(out, all) {
			t.Errorf("group %s admits %v in and %v out, want %v both ways", id, in, out, all)
		}
		spec, err := w.sim.SecurityGroup(id)
		if err != nil {
			t.Fatal(err)
		}
		if want := allowAll(); fmt.Sprint(*spec.Rules) != fmt.Sprint(want) {
			t.Errorf("group %s's rules in the Go API = %+v, want %+v", id, *spec.Rules, want)
		}
	}
}

func TestAuthorizedRulesAreDescribedAndRevoked(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	clients, db := w.createGroup(t, "db-clients"), w.createGroup(t, "db")

	added := w.authorizeIngress(t, db,
		tcpFrom(5432, clients, "10.0.0.0/16"),
		types.IpPermission{IpProtocol: aws.String("6"), FromPort: aws.Int32(22), ToPort: aws.Int32(22), // tcp by number
			IpRanges: []types.IpRange{{CidrIp: aws.String("10.1.2.3/16"), Description: aws.String("bastions")}}},
		types.IpPermission{IpProtocol: aws.String("icmp"), FromPort: aws.Int32(8), ToPort: aws.Int32(-1),
			IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}},
		types.IpPermission{IpProtocol: aws.String("icmpv6"), Ipv6Ranges: []types.Ipv6Range{{CidrIpv6: aws.String("2600:1f14::/32")}}},
		types.IpPermission{IpProtocol: aws.String("47"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(db)}}})
	if !aws.ToBool(added.Return) || len(added.SecurityGroupRules) != 6 {
		t.Fatalf("authorize answered %+v, want 6 rules", added)
	}
	byPort := map[int32]types.SecurityGroupRule{}
	for _, r := range added.SecurityGroupRules {
		if !strings.HasPrefix(aws.ToString(r.SecurityGroupRuleId), "sgr-") || aws.ToString(r.GroupId) != db || aws.ToBool(r.IsEgress) {
			t.Errorf("rule = %+v", r)
		}
		byPort[aws.ToInt32(r.FromPort)] = r
	}
	if r := byPort[22]; aws.ToString(r.CidrIpv4) != "10.1.0.0/16" || aws.ToString(r.IpProtocol) != "tcp" || aws.ToString(r.Description) != "bastions" {
		t.Errorf("the port 22 rule = %+v, want tcp from 10.1.0.0/16 (host bits cleared)", r)
	}

	want := []string{"tcp 5432-5432 [10.0.0.0/16 " + clients + "]", "tcp 22-22 [10.1.0.0/16]", "icmp 8--1 [0.0.0.0/0]",
		"icmpv6 -1--1 [2600:1f14::/32]", "47 [" + db + "]"}
	if got := permissionText(w.describeGroup(t, db).IpPermissions); !slices.Equal(got, want) {
		t.Fatalf("ingress = %v\nwant      %v", got, want)
	}

	t.Run("a filter finds the groups whose rules name a group", func(t *testing.T) {
		out, err := w.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{sdkFilter("ip-permission.group-id", clients)}})
		if err != nil || len(out.SecurityGroups) != 1 || aws.ToString(out.SecurityGroups[0].GroupId) != db {
			t.Fatalf("got %+v, %v; want only %s", out, err, db)
		}
	})
	t.Run("revoking by permission takes out exactly that peer", func(t *testing.T) {
		out, err := w.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(db),
			IpPermissions: []types.IpPermission{tcpFrom(5432, "10.0.0.0/16")}})
		if err != nil || !aws.ToBool(out.Return) || len(out.RevokedSecurityGroupRules) != 1 {
			t.Fatalf("revoke = %+v, %v", out, err)
		}
		if got := permissionText(w.describeGroup(t, db).IpPermissions)[0]; got != "tcp 5432-5432 ["+clients+"]" {
			t.Errorf("after the revoke the first permission is %q", got)
		}
	})
	t.Run("revoking by rule id", func(t *testing.T) {
		if _, err := w.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(db),
			SecurityGroupRuleIds: []string{aws.ToString(byPort[22].SecurityGroupRuleId)}}); err != nil {
			t.Fatal(err)
		}
		if got := permissionText(w.describeGroup(t, db).IpPermissions); slices.Contains(got, "tcp 22-22 [10.1.0.0/16]") {
			t.Errorf("the rule revoked by id is still there: %v", got)
		}
	})
	t.Run("egress rules are authorized and revoked apart from ingress", func(t *testing.T) {
		if _, err := w.ec2.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(clients),
			IpPermissions: []types.IpPermission{tcpFrom(5432, db)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.ec2.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(clients),
			IpPermissions: []types.IpPermission{{IpProtocol: aws.String("-1"), IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}}}}); err != nil {
			t.Fatal(err)
		}
		g := w.describeGroup(t, clients)
		if got := permissionText(g.IpPermissionsEgress); !slices.Equal(got, []string{"tcp 5432-5432 [" + db + "]"}) || len(g.IpPermissions) != 0 {
			t.Errorf("egress = %v, ingress = %v", got, permissionText(g.IpPermissions))
		}
	})
	t.Run("the older top-level parameters state one ingress permission", func(t *testing.T) {
		if _, err := w.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(clients),
			IpProtocol: aws.String("udp"), FromPort: aws.Int32(53), ToPort: aws.Int32(53), CidrIp: aws.String("10.0.0.0/8")}); err != nil {
			t.Fatal(err)
		}
		if got := permissionText(w.describeGroup(t, clients).IpPermissions); !slices.Equal(got, []string{"udp 53-53 [10.0.0.0/8]"}) {
			t.Errorf("ingress = %v", got)
		}
	})
	t.Run("the snapshot carries the rules", func(t *testing.T) {
		st := w.sim.Snapshot()
		i := slices.IndexFunc(st.Groups, func(g SecurityGroupSpec) bool { return g.ID == clients })
		want := SecurityGroupRules{Ingress: []Permission{{Protocol: "udp", FromPort: 53, ToPort: 53, CIDRs: []string{"10.0.0.0/8"}}},
			Egress: []Permission{{Protocol: "tcp", FromPort: 5432, ToPort: 5432, Groups: []string{db}}}}
		if i < 0 || fmt.Sprint(*st.Groups[i].Rules) != fmt.Sprint(want) {
			t.Fatalf("snapshot of %s = %+v, want rules %+v", clients, st.Groups, want)
		}
	})
}

func TestRuleErrorsCarryEC2sCodes(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	clients, db := w.createGroup(t, "db-clients"), w.createGroup(t, "db")
	w.authorizeIngress(t, db, tcpFrom(80, "10.0.0.0/16"))
	other := "vpc-0e1a1e00000000002"
	if err := w.sim.AddVPC(other, "172.31.0.0/16"); err != nil {
		t.Fatal(err)
	}
	foreign, err := w.sim.AddSecurityGroup(SecurityGroupSpec{VPCID: other, Name: "foreign"})
	if err != nil {
		t.Fatal(err)
	}
	authorize := func(perms ...types.IpPermission) error {
		_, err := w.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(db), IpPermissions: perms})
		return err
	}
	revoke := func(perms ...types.IpPermission) error {
		_, err := w.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(db), IpPermissions: perms})
		return err
	}
	noPorts := types.IpPermission{IpProtocol: aws.String("tcp"), IpRanges: []types.IpRange{{CidrIp: aws.String("10.0.0.0/8")}}}
	cases := []struct {
		name, code, msg string
		call            func() error
	}{
		{"a rule the group holds is InvalidPermission.Duplicate", CodeInvalidPermissionDuplicate,
			`the specified rule "peer: 10.0.0.0/16, TCP, from port: 80, to port: 80, ALLOW" already exists`,
			func() error { return authorize(tcpFrom(80, "10.0.0.0/16")) }},
		{"one rule twice in a request is InvalidParameterValue", CodeInvalidParameterValue, "The same permission must not appear multiple times",
			func() error { return authorize(tcpFrom(81, "10.0.0.0/16"), tcpFrom(81, "10.0.0.0/16")) }},
		{"tcp without ports is InvalidParameterValue", CodeInvalidParameterValue,
			"Invalid value 'Must specify both from and to ports with TCP/UDP.' for portRange.", func() error { return authorize(noPorts) }},
		{"a port above 65535 is InvalidPermission.Malformed", CodeInvalidPermissionMalformed, "TCP/UDP port (70000) out of range",
			func() error { return authorize(tcpFrom(70000, "10.0.0.0/16")) }},
		{"a malformed CIDR is InvalidParameterValue", CodeInvalidParameterValue,
			"Value (10.0.0.0/33) for parameter cidrIp is invalid. This is not a valid CIDR block.",
			func() error { return authorize(tcpFrom(82, "10.0.0.0/33")) }},
		{"an IPv4 block among the IPv6 ranges is InvalidParameterValue", CodeInvalidParameterValue,
			"Value (10.0.0.0/8) for parameter cidrIpv6 is invalid. This is not a valid IPv6 CIDR block.",
			func() error {
				return authorize(types.IpPermission{IpProtocol: aws.String("-1"), Ipv6Ranges: []types.Ipv6Range{{CidrIpv6: aws.String("10.0.0.0/8")}}})
			}},
		{"an unknown protocol is InvalidParameterValue", CodeInvalidParameterValue, "Invalid value 'sctp-ish' for IP protocol. Unknown protocol.",
			func() error {
				return authorize(types.IpPermission{IpProtocol: aws.String("sctp-ish"), IpRanges: []types.IpRange{{CidrIp: aws.String("10.0.0.0/8")}}})
			}},
		{"a permission without a peer is MissingParameter", CodeMissingParameter, "",
			func() error { return authorize(types.IpPermission{IpProtocol: aws.String("-1")}) }},
		{"an unknown referenced group is InvalidGroup.NotFound", CodeInvalidGroupNotFound, "The security group 'sg-0404' does not exist",
			func() error { return authorize(tcpFrom(83, "sg-0404")) }},
		{"a referenced group of another VPC is InvalidGroup.NotFound", CodeInvalidGroupNotFound, "",
			func() error { return authorize(tcpFrom(83, foreign)) }},
		{"an unknown group is InvalidGroup.NotFound", CodeInvalidGroupNotFound, "The security group 'sg-0404' does not exist",
			func() error {
				_, err := w.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String("sg-0404"),
					IpPermissions: []types.IpPermission{tcpFrom(84, "10.0.0.0/8")}})
				return err
			}},
		{"revoking a rule the group does not hold is InvalidPermission.NotFound", CodeInvalidPermissionNotFound,
			"The specified rule does not exist in this security group.", func() error { return revoke(tcpFrom(85, "10.0.0.0/16")) }},
		{"a revoke that matches one of two rules revokes neither", CodeInvalidPermissionNotFound, "",
			func() error { return revoke(tcpFrom(80, "10.0.0.0/16"), tcpFrom(86, "10.0.0.0/16")) }},
		{"revoking an unknown rule id is InvalidSecurityGroupRuleId.NotFound", CodeInvalidSecurityGroupRuleIDNotFound, "",
			func() error {
				_, err := w.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(db),
					SecurityGroupRuleIds: []string{"sgr-0123456789abcdef0"}})
				return err
			}},
		{"a name already in the VPC is InvalidGroup.Duplicate", CodeInvalidGroupDuplicate,
			"The security group 'db' already exists for VPC '" + DefaultVPC + "'", func() error {
				_, err := w.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("db"),
					Description: aws.String("again"), VpcId: aws.String(DefaultVPC)})
				return err
			}},
		{"a group without a VPC is VPCIdNotSpecified, as there is no default VPC", CodeVPCIDNotSpecified, "", func() error {
			_, err := w.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("x"), Description: aws.String("x")})
			return err
		}},
		{"a group in an unknown VPC is InvalidVpcID.NotFound", CodeInvalidVpcIDNotFound, "", func() error {
			_, err := w.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("x"), Description: aws.String("x"),
				VpcId: aws.String("vpc-0404")})
			return err
		}},
		{"a group named sg-* is InvalidParameterValue", CodeInvalidParameterValue, "Group names may not be in the format sg-*.", func() error {
			_, err := w.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("sg-mine"), Description: aws.String("x"),
				VpcId: aws.String(DefaultVPC)})
			return err
		}},
		{"deleting the VPC's default group is CannotDelete", CodeCannotDelete, "", func() error {
			_, err := w.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(w.inst.SecurityGroups[0])})
			return err
		}},
		{"deleting a group another group's rule names is DependencyViolation", CodeDependencyViolation, "", func() error {
			w.authorizeIngress(t, db, tcpFrom(5432, clients))
			_, err := w.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(clients)})
			return err
		}},
		{"deleting a group an ENI carries is DependencyViolation", CodeDependencyViolation, "resource " + db + " has a dependent object", func() error {
			w.createENI(t, &ec2.CreateNetworkInterfaceInput{Groups: []string{db}})
			_, err := w.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(db)})
			return err
		}},
		{"a group named by name is InvalidGroup.NotFound outside a default VPC", CodeInvalidGroupNotFound,
			"The security group 'db' does not exist in default VPC 'none'", func() error {
				_, err := w.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupName: aws.String("db")})
				return err
			}},
	}
	before := permissionText(w.describeGroup(t, db).IpPermissions)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantAPIError(t, tc.call(), tc.code, tc.msg, 400)
		})
	}
	if got := permissionText(w.describeGroup(t, db).IpPermissions); !slices.Equal(got, append(before, "tcp 5432-5432 ["+clients+"]")) {
		t.Errorf("after the refused calls the rules are %v, want %v and the one rule authorized on the way", got, before)
	}

	t.Run("a group without a description is MissingParameter", func(t *testing.T) {
		if code := w.rawEC2(t, url.Values{"Action": {"CreateSecurityGroup"}, "GroupName": {"x"}, "VpcId": {DefaultVPC}}); code != CodeMissingParameter {
			t.Fatalf("code %q, want %s", code, CodeMissingParameter)
		}
	})
	t.Run("a group no ENI carries and no rule names is deleted", func(t *testing.T) {
		id := w.createGroup(t, "short-lived")
		if _, err := w.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); err != nil {
			t.Fatal(err)
		}
		_, err := w.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
		wantAPIError(t, err, CodeInvalidGroupNotFound, "", 400)
	})
}

func TestAnENIsGroupsAreCheckedAgainstItsVPCAndTheQuota(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	var six []string
	for i := range 6 {
		six = append(six, w.createGroup(t, fmt.Sprintf("g%d", i)))
	}
	if err := w.sim.AddVPC("vpc-0e1a1e00000000002", "172.31.0.0/16"); err != nil {
		t.Fatal(err)
	}
	foreign := w.sim.Snapshot().VPCs[1].DefaultSG
	modify := func(groups ...string) error {
		_, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(w.inst.PrimaryENI), Groups: groups})
		return err
	}
	cases := []struct {
		name, code, msg string
		call            func() error
	}{
		{"an unknown group is InvalidGroup.NotFound", CodeInvalidGroupNotFound, "The security group 'sg-0404' does not exist",
			func() error { return modify(six[0], "sg-0404") }},
		{"a group of another VPC is InvalidGroup.NotFound", CodeInvalidGroupNotFound,
			fmt.Sprintf("The security group '%s' does not exist in VPC '%s'", foreign, DefaultVPC), func() error { return modify(foreign) }},
		{"a sixth group is SecurityGroupsPerInterfaceLimitExceeded", CodeSecurityGroupsPerInterfaceLimit,
			"The maximum number of security groups per interface has been reached.", func() error { return modify(six...) }},
		{"creating an ENI with six groups is InvalidParameterValue", CodeInvalidParameterValue,
			"user 111122223333 exceeded limit 5 on the number of interface security group memberships", func() error {
				_, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA), Groups: six})
				return err
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantAPIError(t, tc.call(), tc.code, tc.msg, 400) })
	}
	if st, _ := w.sim.ENI(w.inst.PrimaryENI); !slices.Equal(st.Groups, w.inst.SecurityGroups) {
		t.Errorf("the refused calls changed the ENI's groups to %v", st.Groups)
	}
	t.Run("five groups fit", func(t *testing.T) {
		if err := modify(six[:5]...); err != nil {
			t.Fatal(err)
		}
		if st, _ := w.sim.ENI(w.inst.PrimaryENI); !slices.Equal(st.Groups, six[:5]) {
			t.Errorf("groups = %v, want %v", st.Groups, six[:5])
		}
	})
	t.Run("a raised quota lets six through", func(t *testing.T) {
		w := newWorld(t, func(c *Config) { c.SecurityGroupsPerENI = 6 })
		var groups []string
		for i := range 6 {
			groups = append(groups, w.createGroup(t, fmt.Sprintf("g%d", i)))
		}
		w.createENI(t, &ec2.CreateNetworkInterfaceInput{Groups: groups})
	})
	t.Run("an instance with an unknown group is refused", func(t *testing.T) {
		_, err := w.sim.AddInstance(InstanceSpec{Type: "m5.large", SubnetID: DefaultSubnetA, SecurityGroups: []string{"sg-0404"}})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
}

func TestSecurityGroupChangesAreEvents(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	events, cancel := w.sim.Subscribe(16)
	defer cancel()
	next := func() Event { return nextEvent(t, events) }

	db := w.createGroup(t, "db")
	if ev, ok := next().(SecurityGroupChanged); !ok || ev.GroupID != db || ev.VPCID != DefaultVPC || len(ev.Rules.Ingress) != 0 ||
		fmt.Sprint(ev.Rules.Egress) != fmt.Sprint([]Permission{{Protocol: ProtocolAll, CIDRs: []string{"0.0.0.0/0"}}}) {
		t.Fatalf("after CreateSecurityGroup: %#v", ev)
	}
	w.authorizeIngress(t, db, tcpFrom(5432, "10.0.0.0/16"))
	if ev, ok := next().(SecurityGroupChanged); !ok || fmt.Sprint(ev.Rules.Ingress) != fmt.Sprint([]Permission{{Protocol: "tcp",
		FromPort: 5432, ToPort: 5432, CIDRs: []string{"10.0.0.0/16"}}}) {
		t.Fatalf("after AuthorizeSecurityGroupIngress: %#v", ev)
	}
	groups := []string{w.inst.SecurityGroups[0], db}
	if _, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(w.inst.PrimaryENI), Groups: groups}); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next().(ENISecurityGroupsChanged); !ok || ev.ENIID != w.inst.PrimaryENI || ev.InstanceID != w.inst.ID || !slices.Equal(ev.Groups, groups) {
		t.Fatalf("after ModifyNetworkInterfaceAttribute: %#v", ev)
	}
	if _, err := w.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(db),
		IpPermissions: []types.IpPermission{tcpFrom(5432, "10.0.0.0/16")}}); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next().(SecurityGroupChanged); !ok || len(ev.Rules.Ingress) != 0 || ev.Deleted {
		t.Fatalf("after RevokeSecurityGroupIngress: %#v", ev)
	}
	other := w.createGroup(t, "other")
	next()
	if _, err := w.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(other)}); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next().(SecurityGroupChanged); !ok || ev.GroupID != other || !ev.Deleted {
		t.Fatalf("after DeleteSecurityGroup: %#v", ev)
	}
}

func TestTheGoAPISetsRulesAsTheWireChecksThem(t *testing.T) {
	w := newWorld(t, nil)
	clients, err := w.sim.AddSecurityGroup(SecurityGroupSpec{VPCID: DefaultVPC, Name: "clients"})
	if err != nil {
		t.Fatal(err)
	}
	rules := SecurityGroupRules{
		Ingress: []Permission{{Protocol: ProtocolTCP, FromPort: 5432, ToPort: 5432, Groups: []string{clients, "sg-0e1a1e000000000db"}},
			{Protocol: ProtocolICMPv6, FromPort: -1, ToPort: -1, CIDRs: []string{"::/0"}}},
		Egress: AllTraffic(),
	}
	db, err := w.sim.AddSecurityGroup(SecurityGroupSpec{ID: "sg-0e1a1e000000000db", VPCID: DefaultVPC, Name: "db", Rules: &rules})
	if err != nil {
		t.Fatalf("adding a group whose rule names itself and an earlier group: %v", err)
	}
	got, err := w.sim.SecurityGroup(db)
	if err != nil || fmt.Sprint(*got.Rules) != fmt.Sprint(rules) {
		t.Fatalf("rules = %+v, %v; want %+v", got.Rules, err, rules)
	}
	if err := w.sim.SetSecurityGroupRules(db, SecurityGroupRules{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.sim.SecurityGroup(db); len(got.Rules.Ingress)+len(got.Rules.Egress) != 0 {
		t.Fatalf("after setting no rules: %+v", got.Rules)
	}
	for name, bad := range map[string]SecurityGroupRules{
		"a port out of range": {Ingress: []Permission{{Protocol: ProtocolTCP, FromPort: 1, ToPort: 70000, CIDRs: []string{"0.0.0.0/0"}}}},
		"an unknown group":    {Egress: []Permission{{Protocol: ProtocolAll, Groups: []string{"sg-0404"}}}},
		"a rule twice":        {Egress: slices.Concat(AllTraffic(), AllTraffic())},
	} {
		if err := w.sim.SetSecurityGroupRules(db, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("setting %s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestSecurityGroupActionsDrawFromAWSsBuckets(t *testing.T) {
	for action, want := range map[string]BucketSpec{
		"AuthorizeSecurityGroupIngress": {50, 5}, // resource-intensive
		"RevokeSecurityGroupIngress":    {50, 5}, // resource-intensive
		"AuthorizeSecurityGroupEgress":  {50, 5}, // mutating
		"CreateSecurityGroup":           {50, 5}, // mutating
		"DeleteSecurityGroup":           {50, 5}, // mutating
	} {
		if got := DefaultBucket(action); got != want {
			t.Errorf("%s draws from %+v, want %+v", action, got, want)
		}
	}
	w := newWorld(t, func(c *Config) { c.Throttling = true })
	w.sim.SetBucket("AuthorizeSecurityGroupIngress", BucketSpec{Capacity: 1, RefillPerSec: 0.001})
	db := w.createGroup(t, "db")
	w.authorizeIngress(t, db, tcpFrom(1, "10.0.0.0/8"))
	_, err := w.ec2.AuthorizeSecurityGroupIngress(ctxT(t), &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(db),
		IpPermissions: []types.IpPermission{tcpFrom(2, "10.0.0.0/8")}})
	wantAPIError(t, err, CodeRequestLimitExceeded, "", 503)
}
