package metadata

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// Node is what the agent knows about its instance at start.
type Node struct {
	InstanceID     string
	InstanceType   string
	AZ             string
	Region         string
	PrimaryMAC     string // lower case
	PrimaryIP      netip.Addr
	VPCID          string
	VPCCIDRs       []netip.Prefix
	SubnetID       string // of the primary ENI
	SubnetCIDR     netip.Prefix
	SecurityGroups []string // of the primary ENI; new ENIs get the same
	Limits         Limits
	// IPv6 is the primary ENI's IPv6 as IMDS showed it at start; its zero value on an IPv4-only subnet.
	IPv6 IPv6Facts
}

// IPv6Facts are the IPv6 keys IMDS lists for an ENI (network/interfaces/macs/MAC/...), each absent (404) when
// there is none: the /80 prefixes (ipv6-prefix), the single addresses (ipv6s), the subnet's /64
// (subnet-ipv6-cidr-blocks) and the VPC's /56s (vpc-ipv6-cidr-blocks). IMDS shows an assign later than EC2
// does, so the prefixes are a hint; the books hold the /80 the node took.
type IPv6Facts struct {
	Prefixes    []netip.Prefix
	Addrs       []netip.Addr
	SubnetCIDRs []netip.Prefix
	VPCCIDRs    []netip.Prefix
}

// SubnetCIDRText is SubnetCIDR in CIDR notation, "" when it is not known.
func (n Node) SubnetCIDRText() string {
	if !n.SubnetCIDR.IsValid() {
		return ""
	}
	return n.SubnetCIDR.String()
}

// Load reads the node's identity and network from IMDS, then its instance type's limits from the cache file in
// cacheDir or, when absent or for another type, from EC2's DescribeInstanceTypes (and caches them). cacheDir ""
// disables the cache. A required key missing from IMDS is an error matching ErrNotFound.
func Load(ctx context.Context, md IMDSAPI, api ec2client.EC2API, cacheDir string) (*Node, error) {
	n := &Node{}
	var err error
	for _, f := range []struct {
		path string
		dst  *string
	}{
		{"instance-id", &n.InstanceID},
		{"instance-type", &n.InstanceType},
		{"placement/availability-zone", &n.AZ},
		{"mac", &n.PrimaryMAC},
	} {
		if *f.dst, err = get(ctx, md, f.path); err != nil {
			return nil, fmt.Errorf("loading node metadata: %w", err)
		}
	}
	n.PrimaryMAC = strings.ToLower(n.PrimaryMAC)
	if n.PrimaryIP, err = getAddr(ctx, md, "local-ipv4"); err != nil {
		return nil, fmt.Errorf("loading node metadata: %w", err)
	}
	if n.Region, err = region(ctx, md, n.AZ); err != nil {
		return nil, fmt.Errorf("loading node metadata: %w", err)
	}

	base := "network/interfaces/macs/" + n.PrimaryMAC + "/"
	if n.VPCID, err = get(ctx, md, base+"vpc-id"); err != nil {
		return nil, fmt.Errorf("loading the primary ENI's metadata: %w", err)
	}
	if n.SubnetID, err = get(ctx, md, base+"subnet-id"); err != nil {
		return nil, fmt.Errorf("loading the primary ENI's metadata: %w", err)
	}
	cidr, err := get(ctx, md, base+"subnet-ipv4-cidr-block")
	if err != nil {
		return nil, fmt.Errorf("loading the primary ENI's metadata: %w", err)
	}
	if n.SubnetCIDR, err = netip.ParsePrefix(cidr); err != nil {
		return nil, fmt.Errorf("parsing the subnet CIDR %q: %w", cidr, err)
	}
	cidrs, err := getList(ctx, md, base+"vpc-ipv4-cidr-blocks")
	if err != nil {
		return nil, fmt.Errorf("loading the primary ENI's metadata: %w", err)
	}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("parsing the VPC CIDR %q: %w", c, err)
		}
		n.VPCCIDRs = append(n.VPCCIDRs, p)
	}
	if len(n.VPCCIDRs) == 0 {
		return nil, fmt.Errorf("loading the primary ENI's metadata: vpc-ipv4-cidr-blocks: %w", ErrNotFound)
	}
	if n.SecurityGroups, err = getList(ctx, md, base+"security-group-ids"); err != nil {
		return nil, fmt.Errorf("loading the primary ENI's metadata: %w", err)
	}
	if n.IPv6, err = readIPv6(ctx, md, base); err != nil {
		return nil, fmt.Errorf("loading the primary ENI's metadata: %w", err)
	}

	if n.Limits, err = loadLimits(ctx, api, n.InstanceType, cacheDir); err != nil {
		return nil, fmt.Errorf("loading instance limits: %w", err)
	}
	return n, nil
}

func getAddr(ctx context.Context, md IMDSAPI, path string) (netip.Addr, error) {
	s, err := get(ctx, md, path)
	if err != nil {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("parsing %s %q: %w", path, s, err)
	}
	return a, nil
}

// region reads the Region from the instance identity document. An IMDS without that document (some
// EC2-compatible clouds) gets the Region from the AZ, which is the Region plus a zone letter.
func region(ctx context.Context, md IMDSAPI, az string) (string, error) {
	out, err := md.GetRegion(ctx, &imds.GetRegionInput{})
	if err == nil && out.Region != "" {
		return out.Region, nil
	}
	var status interface{ HTTPStatusCode() int }
	if err != nil && !(errors.As(err, &status) && status.HTTPStatusCode() == 404) {
		return "", fmt.Errorf("reading the region from IMDS: %w", err)
	}
	if len(az) < 2 {
		return "", fmt.Errorf("deriving the region from availability zone %q: %w", az, ErrNotFound)
	}
	return az[:len(az)-1], nil
}
