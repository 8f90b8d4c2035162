package cni

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// podAddrs are the addresses of an assignment: an IPv4 pod's IPv4 address, or (the agent's IPv6 mode) an
// IPv6 pod's IPv6 address and its IPv4 egress address.
type podAddrs struct {
	ip     net.IP // IPv4 (4 bytes) or IPv6 (16)
	egress net.IP // IPv6 pods only: their node-local IPv4 egress address
}

func (a podAddrs) ipv6() bool { return a.ip.To4() == nil }

// addrsOf reads an assignment's addresses; what the agent answers otherwise is an internal error.
func addrsOf(asg *api.Assignment) (podAddrs, error) {
	ip := net.ParseIP(asg.IP)
	if v4 := ip.To4(); v4 != nil {
		return podAddrs{ip: v4}, nil
	}
	egress := net.ParseIP(asg.EgressIP).To4()
	if ip == nil || egress == nil {
		return podAddrs{}, types.NewError(types.ErrInternal, fmt.Sprintf(
			"eniwire: the agent assigned %q (IPv4 egress %q): neither an IPv4 address nor an IPv6 one with an IPv4 egress address",
			asg.IP, asg.EgressIP), "")
	}
	return podAddrs{ip: ip, egress: egress}, nil
}

// configure puts the addresses on the pod: an IPv4 pod's on its veth; an IPv6 pod's IPv6 address on its veth
// with the IPv6 default route, and its egress address on an interface of its own (plumbing.EgressIfName).
func configure(podNS *plumbing.Pod, veth *plumbing.Veth, a podAddrs) error {
	if !a.ipv6() {
		return podNS.SetAddress(veth, a.ip)
	}
	if err := podNS.RouteViaHost6(veth.PodIndex, veth.HostMAC); err != nil {
		return err
	}
	if err := podNS.SetIPv6Address(veth, a.ip); err != nil {
		return err
	}
	return podNS.SetEgressAddress(veth.PodIndex, a.egress)
}

// podConfig is what Check expects in the pod for addresses a.
func podConfig(ifName string, a podAddrs, hostMAC net.HardwareAddr, mtu int) plumbing.PodConfig {
	cfg := plumbing.PodConfig{IfName: ifName, HostMAC: hostMAC, MTU: mtu}
	if a.ipv6() {
		cfg.IPv6, cfg.EgressIP = a.ip, a.egress
	} else {
		cfg.IP = a.ip
	}
	return cfg
}
