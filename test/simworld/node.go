package simworld

import (
	"net/netip"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// NodeOf is what the agent would read from IMDS for inst (metadata.Load), with the limits l of its type. The
// VPC id is left out: subnet discovery needs it, and callers that want discovery set it.
func NodeOf(inst ec2sim.Instance, l metadata.Limits) metadata.Node {
	return metadata.Node{InstanceID: inst.ID, InstanceType: inst.Type, AZ: inst.AZ, PrimaryMAC: inst.PrimaryMAC,
		PrimaryIP: netip.MustParseAddr(inst.PrimaryIP), VPCCIDRs: []netip.Prefix{netip.MustParsePrefix(inst.VPCCIDR)},
		SubnetID: inst.SubnetID, SubnetCIDR: netip.MustParsePrefix(inst.SubnetCIDR), SecurityGroups: inst.SecurityGroups,
		Limits: l}
}

// LimitsOf are an instance type's limits as metadata.LoadLimits reads them from DescribeInstanceTypes.
func LimitsOf(it ec2sim.InstanceType) metadata.Limits {
	l := metadata.Limits{MaxENIs: it.MaxENIs, IPv4PerENI: it.IPv4PerENI, NetworkCards: max(len(it.Cards), 1),
		VCPUs: it.VCPUs, Hypervisor: it.Hypervisor}
	if len(it.Cards) > 0 {
		l.MaxENIs = it.Cards[0] // the default card's: the ENIs the controller manages
	}
	return l
}
