package netpol

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol/netpoltest"
)

// The tests' node, and builders that keep their tables short.
const here = "node-a"

type lbl = netpoltest.Labels

type (
	networkingPort   = networkingv1.NetworkPolicyPort
	networkingPolicy = networkingv1.NetworkPolicy
)

// The builders of netpoltest, under the short names the tables use.
var (
	mkPod       = netpoltest.Pod
	withPorts   = netpoltest.WithPorts
	cport       = netpoltest.ContainerPort
	mkNS        = netpoltest.Namespace
	mkPolicy    = netpoltest.Policy
	ingressOnly = netpoltest.IngressOnly
	egressOnly  = netpoltest.EgressOnly
	bothTypes   = netpoltest.BothTypes
	from        = netpoltest.From
	to          = netpoltest.To
	peers       = netpoltest.Peers
	podsWith    = netpoltest.PodsWith
	nsWith      = netpoltest.NSWith
	podsInNS    = netpoltest.PodsInNS
	block       = netpoltest.Block
	port        = netpoltest.Port
	portRangeOf = netpoltest.PortRange
	namedPortOf = netpoltest.NamedPort
	protoOnly   = netpoltest.ProtoOnly
)

// Expected entries.
func entry(prefix string, ports ...dptypes.PortRange) dptypes.PeerPorts {
	return dptypes.PeerPorts{Peer: netip.MustParsePrefix(prefix), Ports: ports}
}

func tcp(first, last uint16) dptypes.PortRange  { return portRange(6, first, last) }
func udp(first, last uint16) dptypes.PortRange  { return portRange(17, first, last) }
func sctp(first, last uint16) dptypes.PortRange { return portRange(132, first, last) }

var anyProto = anyPorts[0]

func entries(es ...dptypes.PeerPorts) []dptypes.PeerPorts { return es }
