package plumbing

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// An IPv6 pod (the agent's IPv6 mode) holds its address of the node's /80 on eth0 and reaches everything
// IPv6 through a link-local gateway, as an IPv4 pod reaches 169.254.1.1: GatewayIPv6 is held by no one, a
// permanent neighbour entry names the host veth's MAC. For IPv4-only destinations it holds a node-local
// IPv4 egress address on its loopback interface (EgressIfName), which the IPv4 default route via GatewayIP
// on eth0 takes as its source. It is not an address of eth0 because container runtimes take the first IPv4
// address of eth0 in a CNI result as the pod's IP (containerd by default), and the pod's IP must be its IPv6
// address; the AWS VPC CNI's chained egress plugin puts it on an interface of its own for the same reason.
// The loopback needs no new link (a dummy interface would need a kernel module not every node has).

// GatewayIPv6 is an IPv6 pod's next hop, held by no one (see GatewayIP).
var GatewayIPv6 = net.ParseIP("fe80::1")

// EgressIfName is the pod's interface holding its IPv4 egress address.
const EgressIfName = "lo"

// RouteViaHost6 gives the pod's interface (by index) a permanent neighbour entry for GatewayIPv6 naming the
// host veth's MAC and an IPv6 default route through it. Running it twice leaves the same state.
func (p *Pod) RouteViaHost6(ifIndex int, hostMAC net.HardwareAddr) error {
	neigh := &netlink.Neigh{
		LinkIndex: ifIndex, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
		IP: GatewayIPv6, HardwareAddr: hostMAC,
	}
	if err := p.nl.NeighSet(neigh); err != nil {
		return fmt.Errorf("adding neighbour %s -> %s: %w", GatewayIPv6, hostMAC, err)
	}
	if err := p.nl.RouteReplace(defaultRoute6(ifIndex)); err != nil {
		return fmt.Errorf("adding default route via %s: %w", GatewayIPv6, err)
	}
	return nil
}

// SetIPv6Address puts ip/128 on the pod end of v without duplicate address detection (the address is the
// node's to hand out, and usable at once), its only global IPv6 address: a reused pair loses every other
// one (its link-local address stays). Running it twice leaves the same state.
func (p *Pod) SetIPv6Address(v *Veth, ip net.IP) error {
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: v.PodIndex, Name: v.PodIfName}}
	addr := &netlink.Addr{IPNet: host128(ip), Flags: unix.IFA_F_NODAD}
	if err := p.nl.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding address %s to %s: %w", addr.IPNet, v.PodIfName, err)
	}
	if !v.Reused {
		return nil
	}
	addrs, err := netlinkdump.Addrs(p.nl, link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", v.PodIfName, err)
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() || a.IPNet.String() == addr.IPNet.String() {
			continue
		}
		if err := p.nl.AddrDel(link, &a); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return fmt.Errorf("removing stale address %s from %s: %w", a.IPNet, v.PodIfName, err)
		}
	}
	return nil
}

// SetEgressAddress gives the pod its IPv4 egress address: egress/32 on EgressIfName (set up; any other
// IPv4 address there but the loopback's 127.0.0.0/8 goes, one a reused namespace kept), and the IPv4
// default route via GatewayIP on the veth (by index) taking it as its source. Running it twice leaves the
// same state.
func (p *Pod) SetEgressAddress(podIndex int, egress net.IP) error {
	link, err := netlinkdump.LinkByName(p.nl, EgressIfName)
	if err != nil {
		return fmt.Errorf("looking up %s in the pod: %w", EgressIfName, err)
	}
	if err := setUp(p.nl, link); err != nil {
		return fmt.Errorf("setting %s up in the pod: %w", EgressIfName, err)
	}
	addr := &netlink.Addr{IPNet: hostNet(egress)}
	if err := p.nl.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding address %s to %s: %w", addr.IPNet, EgressIfName, err)
	}
	others, err := p.egressSideAddrs(link, addr.IPNet.String())
	if err != nil {
		return err
	}
	for _, a := range others {
		if err := p.nl.AddrDel(link, &a); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return fmt.Errorf("removing stale address %s from %s: %w", a.IPNet, EgressIfName, err)
		}
	}
	if err := p.nl.RouteReplace(egressDefaultRoute(podIndex, egress)); err != nil {
		return fmt.Errorf("adding default route via %s from %s: %w", GatewayIP, egress, err)
	}
	return nil
}

// egressSideAddrs are the IPv4 addresses of link (EgressIfName) other than keep and the loopback's.
func (p *Pod) egressSideAddrs(link netlink.Link, keep string) ([]netlink.Addr, error) {
	addrs, err := netlinkdump.Addrs(p.nl, link, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing addresses of %s: %w", EgressIfName, err)
	}
	var others []netlink.Addr
	for _, a := range addrs {
		if a.IPNet.String() != keep && !a.IP.IsLoopback() {
			others = append(others, a)
		}
	}
	return others, nil
}

// verifyIPv6 checks the IPv6 half of what SetIPv6Address and RouteViaHost6 put on link (index idx): ip/128
// its only global IPv6 address, the default route and the gateway's neighbour entry.
func (p *Pod) verifyIPv6(link netlink.Link, ip net.IP, hostMAC net.HardwareAddr) error {
	name, idx := link.Attrs().Name, link.Attrs().Index
	addrs, err := netlinkdump.Addrs(p.nl, link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", name, err)
	}
	want := host128(ip).String()
	found := false
	for _, a := range addrs {
		switch {
		case a.IPNet.String() == want:
			found = true
		case !a.IP.IsLinkLocalUnicast():
			return fmt.Errorf("%w: %s carries %s besides %s", ErrMismatch, name, a.IPNet, want)
		}
	}
	if !found {
		return fmt.Errorf("%w: %s lacks address %s", ErrMismatch, name, want)
	}
	routes, err := netlinkdump.Routes(p.nl, link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("listing routes of %s: %w", name, err)
	}
	if !hasRoute(routes, defaultRoute6(idx)) {
		return fmt.Errorf("%w: no default route via %s on %s", ErrMismatch, GatewayIPv6, name)
	}
	return p.verifyGatewayNeigh(idx, netlink.FAMILY_V6, GatewayIPv6, hostMAC)
}

// verifyEgress checks what SetEgressAddress put in the pod: egress/32 the only IPv4 address of
// EgressIfName but the loopback's, EgressIfName up, and the IPv4 default route on the veth (index podIndex) from it.
func (p *Pod) verifyEgress(podIndex int, egress net.IP) error {
	link, err := netlinkdump.LinkByName(p.nl, EgressIfName)
	if err != nil {
		return fmt.Errorf("%w: interface %s: %w", ErrMismatch, EgressIfName, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("%w: interface %s is down", ErrMismatch, EgressIfName)
	}
	want := hostNet(egress).String()
	all, err := netlinkdump.Addrs(p.nl, link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", EgressIfName, err)
	}
	if !slices.ContainsFunc(all, func(a netlink.Addr) bool { return a.IPNet.String() == want }) {
		return fmt.Errorf("%w: %s lacks the IPv4 egress address %s", ErrMismatch, EgressIfName, want)
	}
	if others, err := p.egressSideAddrs(link, want); err != nil || len(others) > 0 {
		return errors.Join(err, fmt.Errorf("%w: %s carries %v besides %s", ErrMismatch, EgressIfName, others, want))
	}
	routes, err := netlinkdump.Routes(p.nl, &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: podIndex}}, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing IPv4 routes of the pod: %w", err)
	}
	for _, r := range routes {
		if isDefault(r.Dst) && r.Gw.Equal(GatewayIP) && r.Table == syscall.RT_TABLE_MAIN {
			if !r.Src.Equal(egress) {
				return fmt.Errorf("%w: the IPv4 default route leaves from %v, want %s", ErrMismatch, r.Src, egress)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no IPv4 default route via %s", ErrMismatch, GatewayIP)
}

// isDefault says whether dst is a default route's destination (netlink leaves it nil or all zeros).
func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}

func host128(ip net.IP) *net.IPNet {
	return &net.IPNet{IP: ip.To16(), Mask: net.CIDRMask(128, 128)}
}

func defaultRoute6(linkIndex int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: linkIndex, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		Gw: GatewayIPv6, Family: syscall.AF_INET6,
	}
}

func egressDefaultRoute(linkIndex int, egress net.IP) *netlink.Route {
	r := defaultRoute(linkIndex)
	r.Src = egress.To4()
	return r
}
