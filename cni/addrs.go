package cni

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// podAddrs are the addresses of an assignment: an IPv4 pod's IPv4 address; (the agent's IPv6 mode) an IPv6
// pod's IPv6 address and its IPv4 egress address; or (dual-stack mode) an IPv4 and an IPv6 address.
type podAddrs struct {
	v4     net.IP // 4 bytes, or nil for an IPv6 pod
	v6     net.IP // 16 bytes, or nil for an IPv4 pod
	egress net.IP // IPv6 pods only: their node-local IPv4 egress address
}

// equal reports whether a and b name the same addresses.
func (a podAddrs) equal(b podAddrs) bool {
	return a.v4.Equal(b.v4) && a.v6.Equal(b.v6) && a.egress.Equal(b.egress)
}

func (a podAddrs) String() string {
	return fmt.Sprintf("IPv4 %v, IPv6 %v, IPv4 egress %v", a.v4, a.v6, a.egress)
}

// addrsOf reads an assignment's addresses; what the agent answers otherwise is an internal error.
func addrsOf(asg *api.Assignment) (podAddrs, error) {
	ip := net.ParseIP(asg.IP)
	if v4 := ip.To4(); v4 != nil {
		if asg.IPv6 == "" {
			return podAddrs{v4: v4}, nil
		}
		if v6 := net.ParseIP(asg.IPv6); v6 != nil && v6.To4() == nil {
			return podAddrs{v4: v4, v6: v6}, nil
		}
		return podAddrs{}, types.NewError(types.ErrInternal, fmt.Sprintf(
			"eniwire: the agent assigned %q with the IPv6 address %q, which is not IPv6", asg.IP, asg.IPv6), "")
	}
	egress := net.ParseIP(asg.EgressIP).To4()
	if ip == nil || egress == nil {
		return podAddrs{}, types.NewError(types.ErrInternal, fmt.Sprintf(
			"eniwire: the agent assigned %q (IPv4 egress %q): neither an IPv4 address nor an IPv6 one with an IPv4 egress address",
			asg.IP, asg.EgressIP), "")
	}
	return podAddrs{v6: ip, egress: egress}, nil
}

// configure puts the addresses on the pod: an IPv4 address on its veth; an IPv6 address on its veth with the
// IPv6 default route; an egress address on an interface of its own (plumbing.EgressIfName).
func configure(podNS *plumbing.Pod, veth *plumbing.Veth, a podAddrs) error {
	if a.v4 != nil {
		if err := podNS.SetAddress(veth, a.v4); err != nil {
			return err
		}
	}
	if a.v6 == nil {
		return nil
	}
	if err := podNS.RouteViaHost6(veth.PodIndex, veth.HostMAC); err != nil {
		return err
	}
	if err := podNS.SetIPv6Address(veth, a.v6); err != nil {
		return err
	}
	if a.egress == nil {
		return nil
	}
	return podNS.SetEgressAddress(veth.PodIndex, a.egress)
}

// podConfig is what Check expects in the pod for addresses a.
func podConfig(ifName string, a podAddrs, hostMAC net.HardwareAddr, mtu int) plumbing.PodConfig {
	return plumbing.PodConfig{IfName: ifName, HostMAC: hostMAC, MTU: mtu, IP: a.v4, IPv6: a.v6, EgressIP: a.egress}
}
