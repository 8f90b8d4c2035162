package ec2client

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// The EC2API methods, each one call through the limiter, retry and metrics of call. The action name is the
// EC2 API's, the key of Config.Buckets and of the metrics' action label.

// bucketKey returns the bucket of a describe call. AWS charges DescribeNetworkInterfaces and DescribeInstances
// called without filter and without pagination to a smaller bucket of their own, so the client keeps a
// separate one ("<Action>/unfiltered") for them. An ID list counts as a filter (the AWS documentation does not
// say; the simulator's default agrees).
func bucketKey(action string, filtered bool) string {
	if filtered {
		return action
	}
	return action + "/unfiltered"
}

func (c *Client) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, optFns ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	return call(ctx, c, "CreateNetworkInterface", "CreateNetworkInterface", func(ctx context.Context) (*ec2.CreateNetworkInterfaceOutput, error) {
		return c.api.CreateNetworkInterface(ctx, in, optFns...)
	})
}

func (c *Client) AttachNetworkInterface(ctx context.Context, in *ec2.AttachNetworkInterfaceInput, optFns ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error) {
	return call(ctx, c, "AttachNetworkInterface", "AttachNetworkInterface", func(ctx context.Context) (*ec2.AttachNetworkInterfaceOutput, error) {
		return c.api.AttachNetworkInterface(ctx, in, optFns...)
	})
}

func (c *Client) ModifyNetworkInterfaceAttribute(ctx context.Context, in *ec2.ModifyNetworkInterfaceAttributeInput, optFns ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
	return call(ctx, c, "ModifyNetworkInterfaceAttribute", "ModifyNetworkInterfaceAttribute", func(ctx context.Context) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
		return c.api.ModifyNetworkInterfaceAttribute(ctx, in, optFns...)
	})
}

func (c *Client) DetachNetworkInterface(ctx context.Context, in *ec2.DetachNetworkInterfaceInput, optFns ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error) {
	return call(ctx, c, "DetachNetworkInterface", "DetachNetworkInterface", func(ctx context.Context) (*ec2.DetachNetworkInterfaceOutput, error) {
		return c.api.DetachNetworkInterface(ctx, in, optFns...)
	})
}

func (c *Client) DeleteNetworkInterface(ctx context.Context, in *ec2.DeleteNetworkInterfaceInput, optFns ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error) {
	return call(ctx, c, "DeleteNetworkInterface", "DeleteNetworkInterface", func(ctx context.Context) (*ec2.DeleteNetworkInterfaceOutput, error) {
		return c.api.DeleteNetworkInterface(ctx, in, optFns...)
	})
}

func (c *Client) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	return call(ctx, c, "DescribeNetworkInterfaces", bucketKey("DescribeNetworkInterfaces", in != nil && (len(in.Filters) > 0 || len(in.NetworkInterfaceIds) > 0 || in.MaxResults != nil || in.NextToken != nil)), func(ctx context.Context) (*ec2.DescribeNetworkInterfacesOutput, error) {
		return c.api.DescribeNetworkInterfaces(ctx, in, optFns...)
	})
}

func (c *Client) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, optFns ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	return call(ctx, c, "AssignPrivateIpAddresses", "AssignPrivateIpAddresses", func(ctx context.Context) (*ec2.AssignPrivateIpAddressesOutput, error) {
		return c.api.AssignPrivateIpAddresses(ctx, in, optFns...)
	})
}

func (c *Client) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, optFns ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	return call(ctx, c, "UnassignPrivateIpAddresses", "UnassignPrivateIpAddresses", func(ctx context.Context) (*ec2.UnassignPrivateIpAddressesOutput, error) {
		return c.api.UnassignPrivateIpAddresses(ctx, in, optFns...)
	})
}

func (c *Client) AssignIpv6Addresses(ctx context.Context, in *ec2.AssignIpv6AddressesInput, optFns ...func(*ec2.Options)) (*ec2.AssignIpv6AddressesOutput, error) {
	return call(ctx, c, "AssignIpv6Addresses", "AssignIpv6Addresses", func(ctx context.Context) (*ec2.AssignIpv6AddressesOutput, error) {
		return c.api.AssignIpv6Addresses(ctx, in, optFns...)
	})
}

func (c *Client) UnassignIpv6Addresses(ctx context.Context, in *ec2.UnassignIpv6AddressesInput, optFns ...func(*ec2.Options)) (*ec2.UnassignIpv6AddressesOutput, error) {
	return call(ctx, c, "UnassignIpv6Addresses", "UnassignIpv6Addresses", func(ctx context.Context) (*ec2.UnassignIpv6AddressesOutput, error) {
		return c.api.UnassignIpv6Addresses(ctx, in, optFns...)
	})
}

func (c *Client) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	return call(ctx, c, "CreateTags", "CreateTags", func(ctx context.Context) (*ec2.CreateTagsOutput, error) {
		return c.api.CreateTags(ctx, in, optFns...)
	})
}

func (c *Client) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return call(ctx, c, "DescribeInstances", bucketKey("DescribeInstances", in != nil && (len(in.Filters) > 0 || len(in.InstanceIds) > 0 || in.MaxResults != nil || in.NextToken != nil)), func(ctx context.Context) (*ec2.DescribeInstancesOutput, error) {
		return c.api.DescribeInstances(ctx, in, optFns...)
	})
}

func (c *Client) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return call(ctx, c, "DescribeInstanceTypes", "DescribeInstanceTypes", func(ctx context.Context) (*ec2.DescribeInstanceTypesOutput, error) {
		return c.api.DescribeInstanceTypes(ctx, in, optFns...)
	})
}

func (c *Client) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return call(ctx, c, "DescribeSubnets", "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
		return c.api.DescribeSubnets(ctx, in, optFns...)
	})
}

func (c *Client) DescribeVpcs(ctx context.Context, in *ec2.DescribeVpcsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error) {
	return call(ctx, c, "DescribeVpcs", "DescribeVpcs", func(ctx context.Context) (*ec2.DescribeVpcsOutput, error) {
		return c.api.DescribeVpcs(ctx, in, optFns...)
	})
}
