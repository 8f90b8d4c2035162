package datapath

import (
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestDenyRangesCarveOutOfAnAllow: a peer entry that allows every protocol but denies some ports (what
// ClusterNetworkPolicy's flattened verdicts give, netpol/tiers) is enforced by the longest match of
// policy_ports: the denied ports and ranges are dropped, every other port and protocol passes, and a
// narrower prefix's own entry still decides for its peers.
func TestDenyRangesCarveOutOfAnAllow(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	deny := func(r dptypes.PortRange) dptypes.PortRange { r.Deny = true; return r }
	setPolicy(t, d, pod2, dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
		{Peer: prefix("0.0.0.0/0"), Ports: []dptypes.PortRange{anyProtocol, deny(tcp(22, 22)), deny(udp(5000, 5999))}},
		{Peer: prefix("::/0"), Ports: []dptypes.PortRange{anyProtocol}},
		// A peer denied all of TCP but port 443, everything else allowed.
		{Peer: prefix("10.0.8.0/24"), Ports: []dptypes.PortRange{anyProtocol, deny(dptypes.PortRange{Protocol: protoTCP, First: 0, Last: 65535}), tcp(443, 443)}},
		// A peer that allows only TCP 80: no entry beyond it.
		{Peer: prefix("10.0.7.0/24"), Ports: []dptypes.PortRange{tcp(80, 80)}},
	}})
	runCases(t, d, n, []progCase{
		{"a denied port inside the allow", toPod, 0, frame(vpcPeer, pod2, protoTCP, 999, 22), tcActShot, VerdictToPodIngressDenied},
		{"the port after it is allowed", toPod, 0, frame(vpcPeer, pod2, protoTCP, 999, 23), tcActRedirect, VerdictToPodToPeer},
		{"a port inside a denied range", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5500), tcActShot, VerdictToPodIngressDenied},
		{"the range's last port", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5999), tcActShot, VerdictToPodIngressDenied},
		{"the port after the range", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 6000), tcActRedirect, VerdictToPodToPeer},
		{"a peer whose TCP is denied but for 443: 80 denied", toPod, 0, frame(addr("10.0.8.7"), pod2, protoTCP, 999, 80), tcActShot, VerdictToPodIngressDenied},
		{"its 443 allowed", toPod, 0, frame(addr("10.0.8.7"), pod2, protoTCP, 999, 443), tcActRedirect, VerdictToPodToPeer},
		{"its UDP allowed", toPod, 0, frame(addr("10.0.8.7"), pod2, protoUDP, 999, 53), tcActRedirect, VerdictToPodToPeer},
		{"its port 22, which the wider entry denies, is the narrower entry's: denied with the rest of TCP", toPod, 0, frame(addr("10.0.8.7"), pod2, protoTCP, 999, 22), tcActShot, VerdictToPodIngressDenied},
		{"an allow-only entry allows its port", toPod, 0, frame(addr("10.0.7.7"), pod2, protoTCP, 999, 80), tcActRedirect, VerdictToPodToPeer},
		{"and nothing else", toPod, 0, frame(addr("10.0.7.7"), pod2, protoUDP, 999, 53), tcActShot, VerdictToPodIngressDenied},
	})
}
