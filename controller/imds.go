package controller

import (
	"context"

	"github.com/eniwire/eniwire/controller/metadata"
)

// MetadataIMDS lists the ENIs IMDS shows, for the reconciler's comparison (eni.IMDS).
type MetadataIMDS struct{ API metadata.IMDSAPI }

// ENIMACs returns the MACs of the ENIs IMDS lists.
func (m MetadataIMDS) ENIMACs(ctx context.Context) ([]string, error) {
	enis, err := metadata.ENIs(ctx, m.API)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(enis))
	for _, e := range enis {
		out = append(out, e.MAC)
	}
	return out, nil
}

// NodeInfoFrom converts what metadata.Load read.
func NodeInfoFrom(n *metadata.Node) NodeInfo {
	info := NodeInfo{InstanceID: n.InstanceID, InstanceType: n.InstanceType, AZ: n.AZ, PrimaryMAC: n.PrimaryMAC,
		SubnetID: n.SubnetID, SecurityGroups: n.SecurityGroups, MaxENIs: n.Limits.MaxENIs, IPv4PerENI: n.Limits.IPv4PerENI}
	if n.PrimaryIP.IsValid() {
		info.PrimaryIP = n.PrimaryIP.String()
	}
	if n.SubnetCIDR.IsValid() {
		info.SubnetCIDR = n.SubnetCIDR.String()
	}
	for _, p := range n.VPCCIDRs {
		info.VPCCIDRs = append(info.VPCCIDRs, p.String())
	}
	return info
}
