package subnet

import "context"

// FreeAddresses reads subnetID's free addresses from EC2 now (AvailableIpAddressCount), for the pool to ask
// again at once for what fits after the subnet refused an assign as too large for it: EC2's refusal does not
// say how many it has, and a cached count is the one the refused request was sized beside. The read updates
// the cache. 0 when the read fails.
func (p *Placer) FreeAddresses(ctx context.Context, subnetID string) int {
	sn, err := p.cache.reread(ctx, subnetID)
	if err != nil {
		p.log.Warn("reading the free addresses of a subnet that refused an assign", "subnet", subnetID, "error", err)
		return 0
	}
	return sn.Free
}
