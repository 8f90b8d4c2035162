package subnet

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// FreeAddresses reads subnetID's free addresses from EC2 now (AvailableIpAddressCount), for the pool to ask
// again at once for what fits after the subnet refused an assign as too large for it: EC2's refusal does not
// say how many it has, and a cached count is the one the refused request was sized beside. The read updates
// the cache. 0 when the read fails.
func (p *Placer) FreeAddresses(ctx context.Context, subnetID string) int {
	out, err := describeSubnets(ctx, p.cache.ec2, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	if err != nil || len(out) == 0 {
		p.log.Warn("reading the free addresses of a subnet that refused an assign", "subnet", subnetID, "error", err)
		return 0
	}
	sn := subnetFrom(out[0])
	p.cache.put(sn)
	return sn.Free
}
