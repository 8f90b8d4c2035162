package ec2client

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/eniwire/eniwire/internal/clock"
)

// fakeEC2 is a small stateful in-memory EC2: ENIs with private IPs up to a per-ENI limit (so capacity errors
// happen by themselves), a subnet address range, and a script of error codes per action that the next calls
// answer with. Errors are real *smithy.GenericAPIError values with EC2's codes.
type fakeEC2 struct {
	clk clock.Clock

	mu        sync.Mutex
	calls     []fakeCall
	script    map[string][]string
	enis      map[string]*types.NetworkInterface
	tokens    map[string]string // ClientToken -> ENI id
	ipsPerENI int
	nextIP    netip.Addr
	nextID    int
}

type fakeCall struct {
	action string
	at     time.Time
	tag    string // the caller's label, from the context (tests that check ordering)
}

type tagKey struct{}

func withTag(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, tagKey{}, tag)
}

func newFakeEC2(clk clock.Clock) *fakeEC2 {
	return &fakeEC2{
		clk:       clk,
		script:    map[string][]string{},
		enis:      map[string]*types.NetworkInterface{},
		tokens:    map[string]string{},
		ipsPerENI: 10,
		nextIP:    netip.MustParseAddr("10.0.1.10"),
	}
}

// fail makes the next n calls of action answer code.
func (f *fakeEC2) fail(action, code string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.script[action] = append(f.script[action], code)
	}
}

func (f *fakeEC2) count(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.action == action {
			n++
		}
	}
	return n
}

func (f *fakeEC2) callLog() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

var faultMessages = map[string]string{
	CodeRequestLimitExceeded:  "Request limit exceeded.",
	CodeUnauthorizedOperation: "You are not authorized to perform this operation.",
}

// enter records a call and answers its scripted fault, if any. Called with f.mu held.
func (f *fakeEC2) enter(ctx context.Context, action string) error {
	tag, _ := ctx.Value(tagKey{}).(string)
	f.calls = append(f.calls, fakeCall{action: action, at: f.clk.Now(), tag: tag})
	if q := f.script[action]; len(q) > 0 {
		f.script[action] = q[1:]
		return apiError(q[0], faultMessages[q[0]])
	}
	return ctx.Err()
}

func apiError(code, msg string) error {
	fault := smithy.FaultClient
	if code == CodeRequestLimitExceeded {
		fault = smithy.FaultServer
	}
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault}
}

func (f *fakeEC2) eni(id *string) (*types.NetworkInterface, error) {
	e, ok := f.enis[aws.ToString(id)]
	if !ok {
		return nil, apiError("InvalidNetworkInterfaceID.NotFound", fmt.Sprintf("The networkInterface ID '%s' does not exist", aws.ToString(id)))
	}
	return e, nil
}

func (f *fakeEC2) allocIP() string {
	ip := f.nextIP
	f.nextIP = f.nextIP.Next()
	return ip.String()
}

func (f *fakeEC2) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "CreateNetworkInterface"); err != nil {
		return nil, err
	}
	if id, ok := f.tokens[aws.ToString(in.ClientToken)]; ok {
		return &ec2.CreateNetworkInterfaceOutput{NetworkInterface: f.enis[id]}, nil
	}
	n := int(aws.ToInt32(in.SecondaryPrivateIpAddressCount))
	if 1+n > f.ipsPerENI {
		return nil, apiError("PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit.")
	}
	f.nextID++
	e := &types.NetworkInterface{
		NetworkInterfaceId: aws.String(fmt.Sprintf("eni-%017x", f.nextID)),
		SubnetId:           in.SubnetId,
		Status:             types.NetworkInterfaceStatusAvailable,
	}
	for i := range 1 + n {
		e.PrivateIpAddresses = append(e.PrivateIpAddresses, types.NetworkInterfacePrivateIpAddress{
			PrivateIpAddress: aws.String(f.allocIP()), Primary: aws.Bool(i == 0),
		})
	}
	f.enis[*e.NetworkInterfaceId] = e
	if in.ClientToken != nil {
		f.tokens[*in.ClientToken] = *e.NetworkInterfaceId
	}
	return &ec2.CreateNetworkInterfaceOutput{NetworkInterface: e}, nil
}

func (f *fakeEC2) AttachNetworkInterface(ctx context.Context, in *ec2.AttachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "AttachNetworkInterface"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	if e.Attachment != nil {
		return nil, apiError("InvalidParameterValue", fmt.Sprintf("Network interface '%s' is currently in use.", *e.NetworkInterfaceId))
	}
	id := "eni-attach-" + (*e.NetworkInterfaceId)[4:]
	e.Attachment = &types.NetworkInterfaceAttachment{AttachmentId: &id, DeviceIndex: in.DeviceIndex, InstanceId: in.InstanceId}
	e.Status = types.NetworkInterfaceStatusInUse
	return &ec2.AttachNetworkInterfaceOutput{AttachmentId: &id}, nil
}

func (f *fakeEC2) ModifyNetworkInterfaceAttribute(ctx context.Context, in *ec2.ModifyNetworkInterfaceAttributeInput, _ ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "ModifyNetworkInterfaceAttribute"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	if in.Attachment != nil && e.Attachment != nil {
		e.Attachment.DeleteOnTermination = in.Attachment.DeleteOnTermination
	}
	return &ec2.ModifyNetworkInterfaceAttributeOutput{}, nil
}

func (f *fakeEC2) DetachNetworkInterface(ctx context.Context, in *ec2.DetachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DetachNetworkInterface"); err != nil {
		return nil, err
	}
	for _, e := range f.enis {
		if e.Attachment != nil && aws.ToString(e.Attachment.AttachmentId) == aws.ToString(in.AttachmentId) {
			e.Attachment, e.Status = nil, types.NetworkInterfaceStatusAvailable
			return &ec2.DetachNetworkInterfaceOutput{}, nil
		}
	}
	return nil, apiError("InvalidAttachmentID.NotFound", fmt.Sprintf("The interface attachment '%s' does not exist.", aws.ToString(in.AttachmentId)))
}

func (f *fakeEC2) DeleteNetworkInterface(ctx context.Context, in *ec2.DeleteNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DeleteNetworkInterface"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	if e.Attachment != nil {
		return nil, apiError("InvalidParameterValue", fmt.Sprintf("Network interface '%s' is currently in use.", *e.NetworkInterfaceId))
	}
	delete(f.enis, *e.NetworkInterfaceId)
	return &ec2.DeleteNetworkInterfaceOutput{}, nil
}

func (f *fakeEC2) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, _ ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DescribeNetworkInterfaces"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeNetworkInterfacesOutput{}
	if len(in.NetworkInterfaceIds) == 0 {
		for _, e := range f.enis {
			out.NetworkInterfaces = append(out.NetworkInterfaces, *e)
		}
		return out, nil
	}
	for _, id := range in.NetworkInterfaceIds {
		e, err := f.eni(&id)
		if err != nil {
			return nil, err
		}
		out.NetworkInterfaces = append(out.NetworkInterfaces, *e)
	}
	return out, nil
}

func (f *fakeEC2) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "AssignPrivateIpAddresses"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	n := int(aws.ToInt32(in.SecondaryPrivateIpAddressCount))
	if len(e.PrivateIpAddresses)+n > f.ipsPerENI {
		return nil, apiError("PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit.")
	}
	out := &ec2.AssignPrivateIpAddressesOutput{NetworkInterfaceId: e.NetworkInterfaceId}
	for range n {
		ip := f.allocIP()
		e.PrivateIpAddresses = append(e.PrivateIpAddresses, types.NetworkInterfacePrivateIpAddress{PrivateIpAddress: aws.String(ip), Primary: aws.Bool(false)})
		out.AssignedPrivateIpAddresses = append(out.AssignedPrivateIpAddresses, types.AssignedPrivateIpAddress{PrivateIpAddress: aws.String(ip)})
	}
	return out, nil
}

func (f *fakeEC2) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "UnassignPrivateIpAddresses"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	drop := map[string]bool{}
	for _, ip := range in.PrivateIpAddresses {
		drop[ip] = true
	}
	kept := e.PrivateIpAddresses[:0]
	for _, p := range e.PrivateIpAddresses {
		if !drop[aws.ToString(p.PrivateIpAddress)] || aws.ToBool(p.Primary) {
			kept = append(kept, p)
		}
	}
	e.PrivateIpAddresses = kept
	return &ec2.UnassignPrivateIpAddressesOutput{}, nil
}

// AssignIpv6Addresses gives the ENI the /80s it asks for, one after the other out of 2600:1f14::/64.
func (f *fakeEC2) AssignIpv6Addresses(ctx context.Context, in *ec2.AssignIpv6AddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignIpv6AddressesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "AssignIpv6Addresses"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	out := &ec2.AssignIpv6AddressesOutput{NetworkInterfaceId: e.NetworkInterfaceId}
	for range aws.ToInt32(in.Ipv6PrefixCount) {
		f.nextID++
		p := fmt.Sprintf("2600:1f14::%x:0:0/80", f.nextID)
		e.Ipv6Prefixes = append(e.Ipv6Prefixes, types.Ipv6PrefixSpecification{Ipv6Prefix: aws.String(p)})
		out.AssignedIpv6Prefixes = append(out.AssignedIpv6Prefixes, p)
	}
	return out, nil
}

// UnassignIpv6Addresses takes the named /80s off the ENI.
func (f *fakeEC2) UnassignIpv6Addresses(ctx context.Context, in *ec2.UnassignIpv6AddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignIpv6AddressesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "UnassignIpv6Addresses"); err != nil {
		return nil, err
	}
	e, err := f.eni(in.NetworkInterfaceId)
	if err != nil {
		return nil, err
	}
	e.Ipv6Prefixes = slices.DeleteFunc(e.Ipv6Prefixes, func(p types.Ipv6PrefixSpecification) bool {
		return slices.Contains(in.Ipv6Prefixes, aws.ToString(p.Ipv6Prefix))
	})
	return &ec2.UnassignIpv6AddressesOutput{NetworkInterfaceId: e.NetworkInterfaceId, UnassignedIpv6Prefixes: in.Ipv6Prefixes}, nil
}

func (f *fakeEC2) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, _ ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "CreateTags"); err != nil {
		return nil, err
	}
	for _, id := range in.Resources {
		e, err := f.eni(&id)
		if err != nil {
			return nil, err
		}
		e.TagSet = append(e.TagSet, in.Tags...)
	}
	return &ec2.CreateTagsOutput{}, nil
}

func (f *fakeEC2) DescribeInstances(ctx context.Context, _ *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DescribeInstances"); err != nil {
		return nil, err
	}
	return &ec2.DescribeInstancesOutput{}, nil
}

func (f *fakeEC2) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DescribeInstanceTypes"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeInstanceTypesOutput{}
	for _, t := range in.InstanceTypes {
		out.InstanceTypes = append(out.InstanceTypes, types.InstanceTypeInfo{
			InstanceType: t,
			NetworkInfo: &types.NetworkInfo{
				MaximumNetworkInterfaces:  aws.Int32(3),
				Ipv4AddressesPerInterface: aws.Int32(int32(f.ipsPerENI)),
			},
		})
	}
	return out, nil
}

func (f *fakeEC2) DescribeSubnets(ctx context.Context, _ *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DescribeSubnets"); err != nil {
		return nil, err
	}
	return &ec2.DescribeSubnetsOutput{}, nil
}

var _ EC2API = (*fakeEC2)(nil)

func (f *fakeEC2) DescribeVpcs(ctx context.Context, _ *ec2.DescribeVpcsInput, _ ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(ctx, "DescribeVpcs"); err != nil {
		return nil, err
	}
	return &ec2.DescribeVpcsOutput{}, nil
}
