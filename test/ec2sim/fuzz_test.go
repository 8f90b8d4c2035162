package ec2sim

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// answer runs one raw request body through the EC2 handler.
func answer(s *Sim, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	s.EC2Handler().ServeHTTP(rec, req)
	return rec
}

// checkAnswer fails unless the answer is a success with an XML body or a well-formed EC2 error envelope,
// and never a 5xx (no faults are configured, so the simulator itself must not fail).
func checkAnswer(t testing.TB, body string, rec *httptest.ResponseRecorder) (code string) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("body %q: status %d: %s", body, rec.Code, rec.Body.String())
	}
	if rec.Header().Get("x-amzn-RequestId") == "" {
		t.Fatalf("body %q: no request id header", body)
	}
	if rec.Code == http.StatusOK {
		dec := xml.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("body %q: success is not XML: %v", body, err)
			}
		}
		if !strings.Contains(rec.Body.String(), "Response xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>") {
			t.Fatalf("body %q: success without the response element: %s", body, rec.Body.String())
		}
		return ""
	}
	var env errorEnvelope
	if err := xml.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Code == "" || env.Message == "" || env.RequestID == "" {
		t.Fatalf("body %q: status %d with a malformed envelope %q (%v)", body, rec.Code, rec.Body.String(), err)
	}
	if env.XMLName.Local != "Response" || statusOf(env.Code) != rec.Code {
		t.Fatalf("body %q: %s with status %d", body, env.Code, rec.Code)
	}
	return env.Code
}

func fuzzSim(t testing.TB) *Sim {
	cfg := DefaultConfig()
	cfg.Throttling = false
	s := New(cfg)
	if _, err := s.Load(DualStackSeed(cfg.Region)); err != nil {
		t.Fatal(err)
	}
	return s
}

func FuzzDecodeRequest(f *testing.F) {
	inst, err := fuzzSim(f).Instance(DefaultInstance)
	if err != nil {
		f.Fatal(err)
	}
	eni := "&NetworkInterfaceId=" + inst.PrimaryENI // the IPv6 seeds reach past the ENI lookup
	sg := "&GroupId=" + inst.SecurityGroups[0]      // and the security group seeds past the group lookup
	for _, seed := range []string{
		"Action=CreateNetworkInterface&ClientToken=tok-123&Description=d&SecondaryPrivateIpAddressCount=9&SecurityGroupId.1=sg-0123456789abcdef0&SubnetId=" + DefaultSubnetA + "&TagSpecification.1.ResourceType=network-interface&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v&Version=2016-11-15",
		"Action=CreateNetworkInterface&Ipv4PrefixCount=1&SubnetId=" + DefaultSubnetA + "&Version=2016-11-15",
		"Action=AttachNetworkInterface&DeviceIndex=1&InstanceId=" + DefaultInstance + "&NetworkCardIndex=0&NetworkInterfaceId=eni-0a1b2c3d4e5f60001&Version=2016-11-15",
		"Action=ModifyNetworkInterfaceAttribute&Attachment.AttachmentId=eni-attach-0a1b2c3d4e5f60001&Attachment.DeleteOnTermination=true&NetworkInterfaceId=eni-0a1b2c3d4e5f60001",
		"Action=DescribeNetworkInterfaces&Filter.1.Name=tag-key&Filter.1.Value.1=x&Filter.2.Name=status&Filter.2.Value.1=available&MaxResults=5&NextToken=abc",
		"Action=AssignPrivateIpAddresses&AllowReassignment=false&Ipv4Prefix.1=10.0.1.64%2F28&NetworkInterfaceId=eni-1&PrivateIpAddress.1=10.0.1.30",
		"Action=UnassignPrivateIpAddresses&Ipv4Prefix.1=10.0.1.48%2F28&NetworkInterfaceId=eni-0000000000000000f&PrivateIpAddress.1=10.0.1.19",
		"Action=DetachNetworkInterface&AttachmentId=eni-attach-1&Force=true",
		"Action=AssignIpv6Addresses&Ipv6PrefixCount=1" + eni,
		"Action=AssignIpv6Addresses&Ipv6Addresses.1=2600%3A1f14%3Ae1a%3Ae101%3A%3A10&Ipv6Prefix.1=2600%3A1f14%3Ae1a%3Ae101%3A7%3A%3A%2F80" + eni,
		"Action=UnassignIpv6Addresses&Ipv6Addresses.1=2600%3A1f14%3Ae1a%3Ae101%3A%3A10&Ipv6Prefix.1=2600%3A1f14%3Ae1a%3Ae101%3A7%3A%3A%2F80" + eni,
		"Action=CreateNetworkInterface&Ipv6AddressCount=2&Ipv6Prefix.1.Ipv6Prefix=2600%3A1f14%3Ae1a%3Ae101%3A7%3A%3A%2F80&SubnetId=" + DefaultSubnetA,
		"Action=AssociateVpcCidrBlock&AmazonProvidedIpv6CidrBlock=true&VpcId=" + DefaultVPC,
		"Action=AssociateSubnetCidrBlock&Ipv6CidrBlock=2600%3A1f14%3Ae1a%3Ae1ff%3A%3A%2F64&SubnetId=" + DefaultSubnetA,
		"Action=DescribeSubnets&Filter.1.Name=ipv6-cidr-block-association.ipv6-cidr-block&Filter.1.Value.1=2600%3A1f14%3Ae1a%3Ae101%3A%3A%2F64",
		"Action=CreateTags&ResourceId.1=eni-1&Tag.1.Key=k&Tag.1.Value=v",
		"Action=DeleteTags&ResourceId.1=subnet-1&Tag.1.Key=k",
		"Action=DescribeInstanceTypes&InstanceType.1=m5.large&InstanceType.2=c5.xlarge",
		"Action=DescribeInstances&InstanceId.1=i-0123456789abcdef0",
		"Action=DescribeSubnets&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-1&SubnetId.1=subnet-1",
		"Action=DescribeSubnets&Filter.1.Name=tag%3Akubernetes.io%2Frole%2Fcni&Filter.1.Value.1=1&Filter.2.Name=availability-zone&Filter.2.Value.1=us-west-2a",
		"Action=DescribeVpcs&Filter.1.Name=cidr-block-association.cidr-block&Filter.1.Value.1=100.64.0.0%2F16&VpcId.1=" + DefaultVPC,
		"Action=DescribeSecurityGroups&Filter.1.Name=vpc-id&Filter.1.Value.1=" + DefaultVPC + "&GroupId.1=sg-1&MaxResults=5",
		"Action=DescribeSecurityGroups&GroupName.1=default",
		"Action=CreateSecurityGroup&GroupDescription=d&GroupName=db&TagSpecification.1.ResourceType=security-group&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v&VpcId=" + DefaultVPC,
		"Action=AuthorizeSecurityGroupIngress&IpPermissions.1.FromPort=5432&IpPermissions.1.Groups.1.GroupId=" + inst.SecurityGroups[0] +
			"&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.IpRanges.1.CidrIp=10.0.0.0%2F16&IpPermissions.1.Ipv6Ranges.1.CidrIpv6=%3A%3A%2F0&IpPermissions.1.ToPort=5432" + sg,
		"Action=AuthorizeSecurityGroupIngress&CidrIp=10.0.0.0%2F8&FromPort=53&IpProtocol=udp&ToPort=53" + sg,
		"Action=AuthorizeSecurityGroupEgress&IpPermissions.1.FromPort=8&IpPermissions.1.IpProtocol=icmp&IpPermissions.1.IpRanges.1.CidrIp=0.0.0.0%2F0&IpPermissions.1.ToPort=-1" + sg,
		"Action=RevokeSecurityGroupEgress&IpPermissions.1.IpProtocol=-1&IpPermissions.1.IpRanges.1.CidrIp=0.0.0.0%2F0" + sg,
		"Action=RevokeSecurityGroupIngress&SecurityGroupRuleId.1=sgr-0123456789abcdef0" + sg,
		"Action=DeleteSecurityGroup" + sg,
		"Action=Nope", "", "%zz", "Action=DescribeSubnets&Filter.0.Name=x", "Action=DescribeSubnets&DryRun=true",
		"Action=DescribeSubnets&Action=DescribeInstances", "Action=DeleteNetworkInterface&NetworkInterfaceId=eni-" + strings.Repeat("a", 200),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		// A fresh world per input keeps every run reproducible and stops state piling up across inputs.
		checkAnswer(t, body, answer(fuzzSim(t), body))
	})
}

func TestBadInputGetsTheEC2ErrorForIt(t *testing.T) {
	s := fuzzSim(t)
	inst, err := s.Instance(DefaultInstance)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body, code string
	}{
		{"a body that is not a form is MalformedQueryString", "Action=%zz", CodeMalformedQueryString},
		{"no action is MissingAction", "Version=2016-11-15", CodeMissingAction},
		{"an unknown action is InvalidAction", "Action=RunInstances", CodeInvalidAction},
		{"an unknown parameter is UnknownParameter", "Action=DescribeSubnets&Colour=red", CodeUnknownParameter},
		{"a zero list index is UnknownParameter", "Action=DescribeSubnets&SubnetId.0=subnet-1", CodeUnknownParameter},
		{"a repeated parameter is InvalidParameterValue", "Action=DescribeSubnets&MaxResults=5&MaxResults=6", CodeInvalidParameterValue},
		{"a missing SubnetId is MissingParameter", "Action=CreateNetworkInterface", CodeMissingParameter},
		{"a missing DeviceIndex is MissingParameter", "Action=AttachNetworkInterface&NetworkInterfaceId=eni-0123456789abcdef0&InstanceId=" + DefaultInstance, CodeMissingParameter},
		{"a non-numeric count is InvalidParameterValue", "Action=CreateNetworkInterface&SubnetId=" + DefaultSubnetA + "&SecondaryPrivateIpAddressCount=many", CodeInvalidParameterValue},
		{"a non-boolean Force is InvalidParameterValue", "Action=DetachNetworkInterface&AttachmentId=eni-attach-1&Force=maybe", CodeInvalidParameterValue},
		{"a bad ENI id is Malformed", "Action=DeleteNetworkInterface&NetworkInterfaceId=foo", CodeInvalidENIIDMalformed},
		{"a bad instance id is Malformed", "Action=DescribeInstances&InstanceId.1=bar", CodeInvalidInstanceIDMalformed},
		{"an unknown subnet is NotFound", "Action=DescribeSubnets&SubnetId.1=subnet-404", CodeInvalidSubnetIDNotFound},
		{"an unknown VPC is NotFound", "Action=DescribeVpcs&VpcId.1=vpc-404", CodeInvalidVpcIDNotFound},
		{"an unknown VPC filter is InvalidParameterValue", "Action=DescribeVpcs&Filter.1.Name=colour&Filter.1.Value.1=red", CodeInvalidParameterValue},
		{"a bad group id is Malformed", "Action=DescribeSecurityGroups&GroupId.1=nope", CodeInvalidGroupIDMalformed},
		{"an unknown group is NotFound", "Action=DescribeSecurityGroups&GroupId.1=sg-404", CodeInvalidGroupNotFound},
		{"MaxResults with group ids is InvalidParameterCombination", "Action=DescribeSecurityGroups&GroupId.1=sg-404&MaxResults=5", CodeInvalidParameterCombination},
		{"a create with an unknown group is InvalidGroup.NotFound", "Action=CreateNetworkInterface&SubnetId=" + DefaultSubnetA + "&SecurityGroupId.1=sg-404", CodeInvalidGroupNotFound},
		{"a filter without a name is MissingParameter", "Action=DescribeSubnets&Filter.1.Value.1=x", CodeMissingParameter},
		{"a filter without values is InvalidParameterValue", "Action=DescribeSubnets&Filter.1.Name=vpc-id", CodeInvalidParameterValue},
		{"a bad NextToken is InvalidNextToken", "Action=DescribeInstances&NextToken=!!", CodeInvalidNextToken},
		{"a NextToken of another query is InvalidNextToken", "Action=DescribeSubnets&NextToken=ZW5pfGVuaS0xfGFiYw", CodeInvalidNextToken},
		{"a bad prefix is InvalidParameterValue", "Action=AssignPrivateIpAddresses&NetworkInterfaceId=" + inst.PrimaryENI + "&Ipv4Prefix.1=10.0.0.1/27", CodeInvalidParameterValue},
		{"a tag on aws: keys is InvalidParameterValue", "Action=CreateTags&ResourceId.1=" + DefaultSubnetA + "&Tag.1.Key=aws:x&Tag.1.Value=v", CodeInvalidParameterValue},
		{"a tag spec for another resource type is InvalidParameterValue", "Action=CreateNetworkInterface&SubnetId=" + DefaultSubnetA + "&TagSpecification.1.ResourceType=instance&TagSpecification.1.Tag.1.Key=k", CodeInvalidParameterValue},
		{"DryRun answers DryRunOperation", "Action=DescribeSubnets&DryRun=true", CodeDryRunOperation},
		{"MaxResults with an id list is InvalidParameterCombination", "Action=DescribeNetworkInterfaces&MaxResults=5&NetworkInterfaceId.1=eni-0123456789abcdef0", CodeInvalidParameterCombination},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkAnswer(t, tc.body, answer(s, tc.body)); got != tc.code {
				t.Fatalf("code = %q, want %q", got, tc.code)
			}
		})
	}
}
