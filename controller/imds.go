package controller

import (
	"context"
	"net/netip"
	"strings"

	"github.com/eniwire/eniwire/controller/metadata"
)

// MetadataIMDS reads the ENIs IMDS shows: their MACs for the reconciler's comparison (eni.IMDS), and an ENI's
// primary IP for the datapath that puts it on the ENI's link (nodenet.IMDS).
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

// PrimaryIP returns the first address IMDS lists for the ENI with mac (its primary IP), or the zero Addr when
// IMDS does not list the ENI or no address of it yet.
func (m MetadataIMDS) PrimaryIP(ctx context.Context, mac string) (netip.Addr, error) {
	enis, err := metadata.ENIs(ctx, m.API)
	if err != nil {
		return netip.Addr{}, err
	}
	var ip netip.Addr
	for _, e := range enis {
		if strings.EqualFold(e.MAC, mac) && len(e.IPs) > 0 {
			ip = e.IPs[0]
		}
	}
	return ip, nil
}

// NodeInfoFrom converts what metadata.Load read.
func NodeInfoFrom(n *metadata.Node) NodeInfo {
	info := NodeInfo{InstanceID: n.InstanceID, InstanceType: n.InstanceType, AZ: n.AZ, PrimaryMAC: n.PrimaryMAC,
		VPCID: n.VPCID, SubnetID: n.SubnetID, SecurityGroups: n.SecurityGroups, MaxENIs: n.Limits.MaxENIs, IPv4PerENI: n.Limits.IPv4PerENI,
		Hypervisor: n.Limits.Hypervisor, VCPUs: n.Limits.VCPUs}
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
