package cluster

import (
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol/tiers"
)

// Combine is a pod's state as the datapath enforces it: its NetworkPolicy state np (what package netpol
// compiled) inside its ClusterNetworkPolicy tiers r. A direction no rule reaches keeps np's state as it is;
// one that rules reach is flattened (tiers.Flatten), and isolated when any of its flows is denied.
func Combine(np dptypes.PodPolicy, r Rules) dptypes.PodPolicy {
	out := np
	if !r.Ingress.Empty() {
		out.IngressIsolated, out.Ingress = flattened(r.Ingress.Direction(np.IngressIsolated, np.Ingress))
	}
	if !r.Egress.Empty() {
		out.EgressIsolated, out.Egress = flattened(r.Egress.Direction(np.EgressIsolated, np.Egress))
	}
	return out
}

// flattened is a direction's verdicts as PodPolicy entries: an entry that allows by default allows every
// protocol and port and denies its exceptions; one that denies by default allows its exceptions alone.
func flattened(d tiers.Direction) (isolated bool, peers []dptypes.PeerPorts) {
	res := tiers.Flatten(d)
	if !res.Needed() {
		return false, nil
	}
	peers = make([]dptypes.PeerPorts, 0, len(res.Entries))
	for _, e := range res.Entries {
		pp := dptypes.PeerPorts{Peer: e.Peer}
		if e.Allow {
			pp.Ports = make([]dptypes.PortRange, 0, len(e.Except)+1)
			pp.Ports = append(pp.Ports, dptypes.PortRange{Protocol: dptypes.AnyProtocol})
			for _, x := range e.Except {
				x.Deny = true
				pp.Ports = append(pp.Ports, x)
			}
		} else {
			pp.Ports = append([]dptypes.PortRange(nil), e.Except...)
		}
		peers = append(peers, pp)
	}
	return true, peers
}
