package subnet

import (
	"context"
	"slices"

	"github.com/eniwire/eniwire/controller/journal"
)

// LearnSubnets gives the books' ENIs whose subnet CIDR the node does not know yet (one adopted in a subnet
// that neither discovery nor custom networking has read, after the journal was lost or a setting changed) the
// CIDR, read from EC2 by subnet id: the datapath brings an ENI up only with its subnet's gateway, so until then
// its IPs wait. It costs one DescribeSubnets per such subnet, once (a failed read is tried again after
// unreadableFor), and nothing when every ENI's CIDR is known. The Run loop calls it every round.
func (p *Placer) LearnSubnets(ctx context.Context) {
	b := p.books
	var unknown []string
	b.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.SubnetID != "" && e.SubnetCIDR == "" && !slices.Contains(unknown, e.SubnetID) {
				unknown = append(unknown, e.SubnetID)
			}
		}
	})
	for _, id := range unknown {
		sn, err := p.cache.read(ctx, id)
		if err != nil {
			continue // the cache logged it
		}
		err = b.Update(ctx, func(st *journal.State) error {
			for i := range st.ENIs {
				if e := &st.ENIs[i]; e.SubnetID == id && e.SubnetCIDR == "" {
					e.SubnetCIDR = sn.CIDR
				}
			}
			return nil
		})
		if err != nil {
			p.log.Warn("recording the subnet CIDR of adopted ENIs", "subnet", id, "error", err)
			continue
		}
		p.log.Info("subnet of adopted ENIs read", "subnet", id, "cidr", sn.CIDR)
	}
}
