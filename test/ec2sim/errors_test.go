package ec2sim

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func (w *world) createENI(t *testing.T, in *ec2.CreateNetworkInterfaceInput) types.NetworkInterface {
	t.Helper()
	if in == nil {
		in = &ec2.CreateNetworkInterfaceInput{}
	}
	if in.SubnetId == nil {
		in.SubnetId = aws.String(DefaultSubnetA)
	}
	out, err := w.ec2.CreateNetworkInterface(ctxT(t), in)
	if err != nil {
		t.Fatalf("creating ENI: %v", err)
	}
	return *out.NetworkInterface
}

func (w *world) attach(t *testing.T, eniID, instanceID string, dev int32) (string, error) {
	t.Helper()
	out, err := w.ec2.AttachNetworkInterface(ctxT(t), &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: &eniID,
		InstanceId: &instanceID, DeviceIndex: aws.Int32(dev)})
	if err != nil {
		return "", err
	}
	return *out.AttachmentId, nil
}

func TestErrorsCarryEC2sExactCodesMessagesAndStatuses(t *testing.T) {
	const ghostENI = "eni-0123456789abcdef0"
	cases := []struct {
		name   string
		call   func(t *testing.T, w *world) error
		code   string
		msg    func(w *world) string
		status int
	}{
		{
			name: "attaching beyond the instance type's ENI limit is AttachmentLimitExceeded",
			call: func(t *testing.T, w *world) error {
				for dev := int32(1); dev <= 2; dev++ {
					if _, err := w.attach(t, *w.createENI(t, nil).NetworkInterfaceId, w.inst.ID, dev); err != nil {
						t.Fatal(err)
					}
				}
				_, err := w.attach(t, *w.createENI(t, nil).NetworkInterfaceId, w.inst.ID, 3)
				return err
			},
			code: CodeAttachmentLimitExceeded, status: 400,
			msg: func(*world) string { return "Interface count 4 exceeds the limit for m5.large" },
		},
		{
			name: "deleting an attached ENI says it is in use",
			call: func(t *testing.T, w *world) error {
				id := *w.createENI(t, nil).NetworkInterfaceId
				w.note = id
				if _, err := w.attach(t, id, w.inst.ID, 1); err != nil {
					t.Fatal(err)
				}
				_, err := w.ec2.DeleteNetworkInterface(ctxT(t), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: &id})
				return err
			},
			code: CodeInvalidParameterValue, status: 400,
			msg: func(w *world) string {
				return fmt.Sprintf("Network interface '%s' is currently in use.", w.note)
			},
		},
		{
			name: "an unknown ENI is InvalidNetworkInterfaceID.NotFound",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.DeleteNetworkInterface(ctxT(t), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(ghostENI)})
				return err
			},
			code: CodeInvalidENIIDNotFound, status: 400,
			msg: func(*world) string { return "The networkInterface ID '" + ghostENI + "' does not exist" },
		},
		{
			name: "attaching an unknown ENI is InvalidNetworkInterfaceID.NotFound",
			call: func(t *testing.T, w *world) error { _, err := w.attach(t, ghostENI, w.inst.ID, 1); return err },
			code: CodeInvalidENIIDNotFound, status: 400,
			msg: func(*world) string { return "The networkInterface ID '" + ghostENI + "' does not exist" },
		},
		{
			name: "detaching an unknown attachment is InvalidAttachmentID.NotFound",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.DetachNetworkInterface(ctxT(t), &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String("eni-attach-0123456789abcdef0")})
				return err
			},
			code: CodeInvalidAttachmentIDNotFound, status: 400,
			msg: func(*world) string { return "The interface attachment 'eni-attach-0123456789abcdef0' does not exist." },
		},
		{
			name: "a full subnet is InsufficientFreeAddressesInSubnet",
			call: func(t *testing.T, w *world) error {
				if err := w.sim.AddSubnet(SubnetSpec{ID: "subnet-0tiny", VPCID: DefaultVPC, CIDR: "10.0.200.0/28", AZ: "us-west-2a"}); err != nil {
					t.Fatal(err)
				}
				// A /28 has 16 - 5 = 11 usable addresses; 1 primary + 11 secondaries do not fit.
				_, err := w.ec2.CreateNetworkInterface(ctxT(t), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0tiny"),
					SecondaryPrivateIpAddressCount: aws.Int32(11)})
				return err
			},
			code: CodeInsufficientFreeAddresses, status: 400,
			msg: func(*world) string {
				return "The specified subnet does not have enough free addresses to satisfy the request."
			},
		},
		{
			name: "more IPs than the instance type allows per ENI is PrivateIpAddressLimitExceeded",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.AssignPrivateIpAddresses(ctxT(t), &ec2.AssignPrivateIpAddressesInput{
					NetworkInterfaceId: aws.String(w.inst.PrimaryENI), SecondaryPrivateIpAddressCount: aws.Int32(10)})
				return err
			},
			code: CodePrivateIPAddressLimit, status: 400,
			msg: func(*world) string { return "Number of private addresses will exceed limit." },
		},
		{
			name: "detaching the primary ENI is OperationNotPermitted",
			call: func(t *testing.T, w *world) error {
				st, _ := w.sim.ENI(w.inst.PrimaryENI)
				att := st.Attachment.ID
				_, err := w.ec2.DetachNetworkInterface(ctxT(t), &ec2.DetachNetworkInterfaceInput{AttachmentId: &att})
				return err
			},
			code: CodeOperationNotPermitted, status: 400,
			msg: func(*world) string {
				return "The network interface at device index 0 and networkCard index 0 cannot be detached."
			},
		},
		{
			name: "a reused ClientToken with other parameters is IdempotentParameterMismatch",
			call: func(t *testing.T, w *world) error {
				w.createENI(t, &ec2.CreateNetworkInterfaceInput{ClientToken: aws.String("tok-1"), Description: aws.String("a")})
				_, err := w.ec2.CreateNetworkInterface(ctxT(t), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA),
					ClientToken: aws.String("tok-1"), Description: aws.String("b")})
				return err
			},
			code: CodeIdempotentParameterMismatch, status: 400,
			msg: func(*world) string {
				return "The request uses the same client token as a previous, but non-identical request. Do not reuse a client token with different requests, unless the requests are identical."
			},
		},
		{
			name: "DeleteOnTermination without the attachment id is MissingParameter",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.ModifyNetworkInterfaceAttribute(ctxT(t), &ec2.ModifyNetworkInterfaceAttributeInput{
					NetworkInterfaceId: aws.String(w.inst.PrimaryENI),
					Attachment:         &types.NetworkInterfaceAttachmentChanges{DeleteOnTermination: aws.Bool(false)}})
				return err
			},
			code: CodeMissingParameter, status: 400,
			msg: func(*world) string { return "The request must contain the parameter Attachment.AttachmentId" },
		},
		{
			name: "a malformed IP address is InvalidParameterValue",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.AssignPrivateIpAddresses(ctxT(t), &ec2.AssignPrivateIpAddressesInput{
					NetworkInterfaceId: aws.String(w.inst.PrimaryENI), PrivateIpAddresses: []string{"10.0.0.300"}})
				return err
			},
			code: CodeInvalidParameterValue, status: 400,
			msg: func(*world) string {
				return "Invalid value '10.0.0.300' for PrivateIpAddress.1. Expected an IPv4 address."
			},
		},
		{
			name: "a MaxResults out of range is InvalidParameterValue",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(2)})
				return err
			},
			code: CodeInvalidParameterValue, status: 400,
			msg: func(*world) string {
				return "Value (2) for parameter MaxResults is invalid. Expected a value between 5 and 1000."
			},
		},
		{
			name: "an unknown filter is InvalidParameterValue",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{
					Filters: []types.Filter{{Name: aws.String("colour"), Values: []string{"red"}}}})
				return err
			},
			code: CodeInvalidParameterValue, status: 400,
			msg: func(*world) string { return "The filter 'colour' is invalid" },
		},
		{
			name: "a malformed ENI id is InvalidNetworkInterfaceID.Malformed",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.DeleteNetworkInterface(ctxT(t), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-zz")})
				return err
			},
			code: CodeInvalidENIIDMalformed, status: 400,
			msg: func(*world) string { return `Invalid id: "eni-zz" (expecting "eni-...")` },
		},
		{
			name: "a bad NextToken is InvalidNextToken",
			call: func(t *testing.T, w *world) error {
				_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{NextToken: aws.String("bogus")})
				return err
			},
			code: CodeInvalidNextToken, status: 400,
			msg: func(*world) string { return "The specified NextToken is not valid." },
		},
		{
			name: "a scripted throttle is RequestLimitExceeded with 503",
			call: func(t *testing.T, w *world) error {
				w.sim.Faults().Script("DescribeInstances", CodeRequestLimitExceeded, 1)
				_, err := w.ec2.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{})
				return err
			},
			code: CodeRequestLimitExceeded, status: 503,
			msg: func(*world) string { return "Request limit exceeded." },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, nil)
			err := tc.call(t, w)
			wantAPIError(t, err, tc.code, tc.msg(w), tc.status)
			if n := w.sim.Counters()[""].Calls; n != 0 {
				t.Fatalf("%d calls counted without an action", n)
			}
		})
	}
}
