package cluster

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// giveIPv6 gives the node of an IPv6 cluster its IPv6 address, as EC2 and the OS do for an instance
// launched in a subnet with an IPv6 block: EC2 assigns one address to the primary ENI (AssignIpv6Addresses
// with the real SDK, from inside the node, as the agent calls EC2), and the OS puts it on eth0 as a /128,
// which is what DHCPv6 hands out there; the fabric already gave eth0 its default route through the
// router's fe80::1.
func (c *Cluster) giveIPv6(ctx context.Context, n *Node) (netip.Addr, error) {
	api := ec2.New(ec2.Options{
		Region:       c.Sim.Config().Region,
		BaseEndpoint: aws.String(n.Netns.EC2URL),
		Credentials:  credentials.NewStaticCredentialsProvider(ec2sim.TestAccessKey, ec2sim.TestSecretKey, ""),
		HTTPClient:   n.Netns.HTTPClient(),
	})
	out, err := api.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(n.Instance.PrimaryENI), Ipv6AddressCount: aws.Int32(1)})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("assigning an IPv6 address to %s: %w", n.Instance.PrimaryENI, err)
	}
	if len(out.AssignedIpv6Addresses) != 1 {
		return netip.Addr{}, fmt.Errorf("assigning an IPv6 address to %s: EC2 assigned %v", n.Instance.PrimaryENI, out.AssignedIpv6Addresses)
	}
	a, err := netip.ParseAddr(out.AssignedIpv6Addresses[0])
	if err != nil || !a.Is6() {
		return netip.Addr{}, fmt.Errorf("assigning an IPv6 address to %s: %q is no IPv6 address", n.Instance.PrimaryENI, out.AssignedIpv6Addresses[0])
	}
	link := n.Netns.Links[n.Instance.PrimaryMAC]
	if link == "" {
		link = "eth0"
	}
	if b, err := n.Netns.Command(ctx, "ip", "-6", "address", "add", netip.PrefixFrom(a, 128).String(), "dev", link, "nodad").CombinedOutput(); err != nil {
		return netip.Addr{}, fmt.Errorf("adding %s to %s of %s: %w: %s", a, link, n.Instance.ID, err, b)
	}
	return a, nil
}
