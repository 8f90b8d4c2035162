package datapath

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/eniwire/eniwire/bpf"
)

// Pod is one entry of the pods map.
type Pod struct {
	IP          netip.Addr
	HostIfindex int // host end of the pod's veth
	ENIIfindex  int // the ENI whose secondary IP the pod holds
	Flags       uint32
	// VPCOnly: the pod's packets take the VPC's way (POD_PATH_VPC in bpf/maps.h).
	VPCOnly bool
}

// ENI is one entry of the enis map.
type ENI struct {
	Ifindex int
	Gateway netip.Addr
	MAC     net.HardwareAddr
	Subnet  netip.Prefix
}

// RouteKind says what from_pod does with a destination.
type RouteKind uint32

const (
	// RouteVPC sends packets out of the pod's own ENI.
	RouteVPC = RouteKind(bpf.EniwireRouteKindROUTE_VPC)
	// RouteHost hands packets to the host stack (the node's addresses, the Service CIDR).
	RouteHost = RouteKind(bpf.EniwireRouteKindROUTE_HOST)
)

func (k RouteKind) String() string {
	switch k {
	case RouteVPC:
		return "vpc"
	case RouteHost:
		return "host"
	}
	return fmt.Sprintf("kind-%d", uint32(k))
}

// Route is one entry of the routes map.
type Route struct {
	Prefix netip.Prefix
	Kind   RouteKind
}

// Verdict names a per-CPU counter: what a program did with a packet.
type Verdict uint32

// verdictNames are the Prometheus label values; they are an API, change them only with the C enum.
var verdictNames = [...]struct{ program, verdict string }{
	bpf.EniwireVerdictVERDICT_FROM_POD_OUT_ENI:   {"from_pod", "out_eni"},
	bpf.EniwireVerdictVERDICT_FROM_POD_TO_PEER:   {"from_pod", "to_peer"},
	bpf.EniwireVerdictVERDICT_FROM_POD_TO_HOST:   {"from_pod", "to_host"},
	bpf.EniwireVerdictVERDICT_FROM_POD_SPOOF:     {"from_pod", "dropped_spoof"},
	bpf.EniwireVerdictVERDICT_FROM_POD_MALFORMED: {"from_pod", "dropped_malformed"},
	bpf.EniwireVerdictVERDICT_FROM_POD_NON_IPV4:  {"from_pod", "pass_non_ipv4"},
	bpf.EniwireVerdictVERDICT_FROM_POD_NO_ENI:    {"from_pod", "pass_no_eni"},
	bpf.EniwireVerdictVERDICT_TO_VPC_REROUTED:    {"to_vpc", "rerouted"},
	bpf.EniwireVerdictVERDICT_TO_VPC_PASS:        {"to_vpc", "pass"},
	bpf.EniwireVerdictVERDICT_TO_POD_TO_PEER:     {"to_pod", "to_peer"},
	bpf.EniwireVerdictVERDICT_TO_POD_HOST_FLOW:   {"to_pod", "to_host_flow"},
	bpf.EniwireVerdictVERDICT_TO_POD_PASS:        {"to_pod", "pass"},
	bpf.EniwireVerdictVERDICT_REDIRECT_FAILED:    {"any", "dropped_redirect_failed"},
	bpf.EniwireVerdictVERDICT_FROM_POD_HOST_FLOW: {"from_pod", "to_host_flow"},
	bpf.EniwireVerdictVERDICT_FROM_POD_TTL:       {"from_pod", "to_host_ttl"},
	bpf.EniwireVerdictVERDICT_FROM_POD_TOO_BIG:   {"from_pod", "to_host_too_big"},
	bpf.EniwireVerdictVERDICT_FROM_POD_IPV6:      {"from_pod", "dropped_ipv6"},
	bpf.EniwireVerdictVERDICT_TO_POD_TTL:         {"to_pod", "to_host_ttl"},
	bpf.EniwireVerdictVERDICT_TO_POD_TOO_BIG:     {"to_pod", "to_host_too_big"},
	bpf.EniwireVerdictVERDICT_FROM_POD_VLAN:      {"from_pod", "dropped_vlan"},
	bpf.EniwireVerdictVERDICT_FROM_POD_ETHERTYPE: {"from_pod", "dropped_ethertype"},
	bpf.EniwireVerdictVERDICT_TO_POD_SPOOF:       {"to_pod", "dropped_spoof"},
	bpf.EniwireVerdictVERDICT_TO_POD_HOST_SOURCE: {"to_pod", "to_host_source"},
	bpf.EniwireVerdictVERDICT_FROM_POD_IP_HEADER: {"from_pod", "to_host_ip_header"},
	bpf.EniwireVerdictVERDICT_TO_POD_IP_HEADER:   {"to_pod", "to_host_ip_header"},
	bpf.EniwireVerdictVERDICT_WRITE_FAILED:       {"any", "dropped_write_failed"},
	bpf.EniwireVerdictVERDICT_TO_POD_OUTSIDE_VPC: {"to_pod", "to_host_outside_vpc"},

	bpf.EniwireVerdictVERDICT_FROM_POD_EGRESS_DENIED:   {"from_pod", "dropped_policy_egress"},
	bpf.EniwireVerdictVERDICT_FROM_POD_INGRESS_DENIED:  {"from_pod", "dropped_policy_ingress"},
	bpf.EniwireVerdictVERDICT_TO_POD_EGRESS_DENIED:     {"to_pod", "dropped_policy_egress"},
	bpf.EniwireVerdictVERDICT_TO_POD_INGRESS_DENIED:    {"to_pod", "dropped_policy_ingress"},
	bpf.EniwireVerdictVERDICT_FROM_POD_EGRESS_ALLOWED:  {"from_pod", "policy_egress_allowed"},
	bpf.EniwireVerdictVERDICT_FROM_POD_INGRESS_ALLOWED: {"from_pod", "policy_ingress_allowed"},
	bpf.EniwireVerdictVERDICT_TO_POD_EGRESS_ALLOWED:    {"to_pod", "policy_egress_allowed"},
	bpf.EniwireVerdictVERDICT_TO_POD_INGRESS_ALLOWED:   {"to_pod", "policy_ingress_allowed"},
	bpf.EniwireVerdictVERDICT_FORWARD_EGRESS_DENIED:    {"forward", "dropped_policy_egress"},
	bpf.EniwireVerdictVERDICT_FORWARD_INGRESS_DENIED:   {"forward", "dropped_policy_ingress"},
	bpf.EniwireVerdictVERDICT_FORWARD_EGRESS_ALLOWED:   {"forward", "policy_egress_allowed"},
	bpf.EniwireVerdictVERDICT_FORWARD_INGRESS_ALLOWED:  {"forward", "policy_ingress_allowed"},

	bpf.EniwireVerdictVERDICT_FROM_POD_IPV6HEADER: {"from_pod", "to_host_ipv6_header"},
	bpf.EniwireVerdictVERDICT_TO_POD_IPV6HEADER:   {"to_pod", "to_host_ipv6_header"},

	bpf.EniwireVerdictVERDICT_FROM_POD_CT_FULL: {"from_pod", "dropped_conntrack_full"},
	bpf.EniwireVerdictVERDICT_TO_POD_CT_FULL:   {"to_pod", "dropped_conntrack_full"},
}

// Verdicts, as the programs count them.
const (
	VerdictFromPodOutENI    = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_OUT_ENI)
	VerdictFromPodToPeer    = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_TO_PEER)
	VerdictFromPodToHost    = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_TO_HOST)
	VerdictFromPodSpoof     = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_SPOOF)
	VerdictFromPodMalformed = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_MALFORMED)
	VerdictFromPodNonIPv4   = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_NON_IPV4)
	VerdictFromPodNoENI     = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_NO_ENI)
	VerdictToVPCRerouted    = Verdict(bpf.EniwireVerdictVERDICT_TO_VPC_REROUTED)
	VerdictToVPCPass        = Verdict(bpf.EniwireVerdictVERDICT_TO_VPC_PASS)
	VerdictToPodToPeer      = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_TO_PEER)
	VerdictToPodHostFlow    = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_HOST_FLOW)
	VerdictToPodPass        = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_PASS)
	VerdictRedirectFailed   = Verdict(bpf.EniwireVerdictVERDICT_REDIRECT_FAILED)
	VerdictFromPodHostFlow  = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_HOST_FLOW)
	VerdictFromPodTTL       = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_TTL)
	VerdictFromPodTooBig    = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_TOO_BIG)
	VerdictFromPodIPv6      = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_IPV6)
	VerdictToPodTTL         = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_TTL)
	VerdictToPodTooBig      = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_TOO_BIG)
	VerdictFromPodVLAN      = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_VLAN)
	VerdictFromPodEtherType = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_ETHERTYPE)
	VerdictToPodSpoof       = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_SPOOF)
	VerdictToPodHostSource  = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_HOST_SOURCE)
	VerdictFromPodIPHeader  = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_IP_HEADER)
	VerdictToPodIPHeader    = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_IP_HEADER)
	VerdictWriteFailed      = Verdict(bpf.EniwireVerdictVERDICT_WRITE_FAILED)
	VerdictToPodOutsideVPC  = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_OUTSIDE_VPC)

	// NetworkPolicy: a denial is a packet's verdict; an *Allowed counter counts the new flows a policy
	// let open, beside the verdict of their packets.
	VerdictFromPodEgressDenied   = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_EGRESS_DENIED)
	VerdictFromPodIngressDenied  = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_INGRESS_DENIED)
	VerdictToPodEgressDenied     = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_EGRESS_DENIED)
	VerdictToPodIngressDenied    = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_INGRESS_DENIED)
	VerdictFromPodEgressAllowed  = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_EGRESS_ALLOWED)
	VerdictFromPodIngressAllowed = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_INGRESS_ALLOWED)
	VerdictToPodEgressAllowed    = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_EGRESS_ALLOWED)
	VerdictToPodIngressAllowed   = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_INGRESS_ALLOWED)
	VerdictForwardEgressDenied   = Verdict(bpf.EniwireVerdictVERDICT_FORWARD_EGRESS_DENIED)
	VerdictForwardIngressDenied  = Verdict(bpf.EniwireVerdictVERDICT_FORWARD_INGRESS_DENIED)
	VerdictForwardEgressAllowed  = Verdict(bpf.EniwireVerdictVERDICT_FORWARD_EGRESS_ALLOWED)
	VerdictForwardIngressAllowed = Verdict(bpf.EniwireVerdictVERDICT_FORWARD_INGRESS_ALLOWED)

	// IPv6: a hop-by-hop options header, which every router on the way reads, sends a packet to the host.
	VerdictFromPodIPv6Header = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_IPV6HEADER)
	VerdictToPodIPv6Header   = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_IPV6HEADER)

	// Conntrack full: an isolated pod's new fast-path flow dropped, since no entry could record it (its
	// replies could not be told from strangers'): the flow opens in neither direction.
	VerdictFromPodCTFull = Verdict(bpf.EniwireVerdictVERDICT_FROM_POD_CT_FULL)
	VerdictToPodCTFull   = Verdict(bpf.EniwireVerdictVERDICT_TO_POD_CT_FULL)
	numVerdicts          = int(bpf.EniwireVerdictVERDICT_MAX)
)

// Program is the program that counts this verdict.
func (v Verdict) Program() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v].program
	}
	return "unknown"
}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v].verdict
	}
	return fmt.Sprintf("verdict-%d", uint32(v))
}

// Counter is one verdict's packets and bytes summed over CPUs.
type Counter struct {
	Verdict Verdict
	Packets uint64
	Bytes   uint64
}

// PodTraffic is one pod's traffic summed over CPUs: Tx is what it sent from its own address, Rx what the
// fast paths redirected towards it (not what the host stack delivers to it).
type PodTraffic struct {
	IP                 netip.Addr
	TxPackets, TxBytes uint64
	RxPackets, RxBytes uint64
}

// addrKey converts an address to the maps' 16-byte form (IPv4-mapped for IPv4). An IPv6 address with a zone
// is refused: no map entry is per interface.
func addrKey(a netip.Addr) (bpf.EniwireIpAddr, error) {
	if !a.IsValid() {
		return bpf.EniwireIpAddr{}, fmt.Errorf("invalid address")
	}
	if a.Zone() != "" {
		return bpf.EniwireIpAddr{}, fmt.Errorf("address %s: a zone has no place in the maps", a)
	}
	return bpf.EniwireIpAddr{Addr: a.As16()}, nil
}

func addrFromKey(k bpf.EniwireIpAddr) netip.Addr {
	return netip.AddrFrom16(k.Addr).Unmap()
}

// mappedBits is how many bits of an IPv4-mapped address precede the IPv4 address.
const mappedBits = 96

// keyBits is a prefix's length in the maps' 16-byte addresses: IPv4's counts the mapped bits too (an
// IPv4-mapped IPv6 prefix is IPv6's, as written).
func keyBits(p netip.Prefix) int {
	if p.Addr().Is4() {
		return mappedBits + p.Bits()
	}
	return p.Bits()
}

// The address families of the enis map's gateway (linux/socket.h).
const (
	afInet  = 2
	afInet6 = 10
)

func addressFamily(a netip.Addr) uint8 {
	if a.Unmap().Is4() {
		return afInet
	}
	return afInet6
}

func routeKey(p netip.Prefix) (bpf.EniwireRouteKey, error) {
	p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
	a, err := addrKey(p.Addr())
	if err != nil {
		return bpf.EniwireRouteKey{}, err
	}
	return bpf.EniwireRouteKey{Prefixlen: uint32(keyBits(p)), Dst: a}, nil
}

func prefixFromRouteKey(k bpf.EniwireRouteKey) netip.Prefix {
	a := addrFromKey(k.Dst)
	if a.Is4() {
		return netip.PrefixFrom(a, int(k.Prefixlen)-mappedBits)
	}
	return netip.PrefixFrom(a, int(k.Prefixlen))
}
