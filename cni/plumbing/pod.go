package plumbing

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// GatewayIP is the pod's next hop: an address no one holds. The pod reaches it through a permanent neighbour
// entry naming the host veth's MAC, so the host needs no address and answers no ARP for it.
var GatewayIP = net.IPv4(169, 254, 1, 1).To4()

// ErrMismatch is returned (wrapped) by Pod.Verify when the pod's namespace differs from what it should hold.
var ErrMismatch = errors.New("pod network does not match the assignment")

// PodConfig is what the pod side of the veth carries (RouteViaHost and SetAddress put it there; Verify checks it).
// An IPv6 pod has IPv6 and EgressIP instead of IP (RouteViaHost6, SetIPv6Address and SetEgressAddress).
type PodConfig struct {
	IfName   string
	IP       net.IP
	IPv6     net.IP
	EgressIP net.IP
	HostMAC  net.HardwareAddr
	MTU      int
}

// RouteViaHost gives the pod's interface (by index) a link route to GatewayIP, a permanent neighbour entry for
// it naming the host veth's MAC and a default route through it. None of it needs the pod's address, so ADD
// does it while the agent assigns one. Every step replaces, so running it twice leaves the same state.
func (p *Pod) RouteViaHost(ifIndex int, hostMAC net.HardwareAddr) error {
	if err := p.nl.RouteReplace(gatewayRoute(ifIndex)); err != nil {
		return fmt.Errorf("adding route to %s: %w", GatewayIP, err)
	}
	neigh := &netlink.Neigh{
		LinkIndex: ifIndex, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: GatewayIP, HardwareAddr: hostMAC,
	}
	if err := p.nl.NeighSet(neigh); err != nil {
		return fmt.Errorf("adding neighbour %s -> %s: %w", GatewayIP, hostMAC, err)
	}
	if err := p.nl.RouteReplace(defaultRoute(ifIndex)); err != nil {
		return fmt.Errorf("adding default route via %s: %w", GatewayIP, err)
	}
	return nil
}

// SetAddress puts ip/32 on the pod end of v, its only IPv4 address: a pair reused from a released sandbox (the
// runtime kept the namespace, the agent had not yet removed the veth) may still carry the old IP, which now
// belongs to the pool, so a reused pair loses every other address; a new one has none. Running it twice
// leaves the same state.
func (p *Pod) SetAddress(v *Veth, ip net.IP) error {
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: v.PodIndex, Name: v.PodIfName}}
	addr := &netlink.Addr{IPNet: hostNet(ip)}
	if err := p.nl.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding address %s to %s: %w", addr.IPNet, v.PodIfName, err)
	}
	if v.Reused {
		return p.removeOtherAddrs(link, addr)
	}
	return nil
}

// Verify checks that the pod's namespace holds exactly what ADD puts there. Errors wrap ErrMismatch and
// say what differs.
func (p *Pod) Verify(cfg PodConfig) error {
	link, err := netlinkdump.LinkByName(p.nl, cfg.IfName)
	if err != nil {
		return fmt.Errorf("%w: interface %s: %w", ErrMismatch, cfg.IfName, err)
	}
	idx := link.Attrs().Index
	if link.Attrs().OperState == netlink.OperDown || link.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("%w: interface %s is down", ErrMismatch, cfg.IfName)
	}
	if cfg.MTU != 0 && link.Attrs().MTU != cfg.MTU {
		return fmt.Errorf("%w: %s has MTU %d, want %d", ErrMismatch, cfg.IfName, link.Attrs().MTU, cfg.MTU)
	}
	addrs, err := netlinkdump.Addrs(p.nl, link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", cfg.IfName, err)
	}
	want := ""
	if cfg.IP != nil {
		want = hostNet(cfg.IP).String()
	}
	found := false
	for _, a := range addrs {
		if a.IPNet.String() == want {
			found = true
		} else {
			return fmt.Errorf("%w: %s carries %s besides %s", ErrMismatch, cfg.IfName, a.IPNet, want)
		}
	}
	if !found && want != "" {
		return fmt.Errorf("%w: %s lacks address %s", ErrMismatch, cfg.IfName, want)
	}
	routes, err := netlinkdump.Routes(p.nl, link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing routes of %s: %w", cfg.IfName, err)
	}
	if !hasRoute(routes, gatewayRoute(idx)) {
		return fmt.Errorf("%w: no route to %s on %s", ErrMismatch, GatewayIP, cfg.IfName)
	}
	if !hasRoute(routes, defaultRoute(idx)) {
		return fmt.Errorf("%w: no default route via %s on %s", ErrMismatch, GatewayIP, cfg.IfName)
	}
	if err := p.verifyGatewayNeigh(idx, netlink.FAMILY_V4, GatewayIP, cfg.HostMAC); err != nil {
		return err
	}
	if cfg.IPv6 != nil {
		if err := p.verifyIPv6(link, cfg.IPv6, cfg.HostMAC); err != nil {
			return err
		}
	}
	if cfg.EgressIP != nil {
		return p.verifyEgress(idx, cfg.EgressIP)
	}
	return nil
}

// verifyGatewayNeigh checks that the interface (by index) has a permanent neighbour entry for gw naming the
// host veth's MAC.
func (p *Pod) verifyGatewayNeigh(idx, family int, gw net.IP, hostMAC net.HardwareAddr) error {
	neighs, err := netlinkdump.Neighs(p.nl, idx, family)
	if err != nil {
		return fmt.Errorf("listing neighbours of the pod: %w", err)
	}
	for _, n := range neighs {
		if n.IP.Equal(gw) {
			if n.State&netlink.NUD_PERMANENT == 0 || n.HardwareAddr.String() != hostMAC.String() {
				return fmt.Errorf("%w: neighbour %s is %s (state %#x), want permanent %s",
					ErrMismatch, gw, n.HardwareAddr, n.State, hostMAC)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no neighbour entry for %s", ErrMismatch, gw)
}

// removeOtherAddrs deletes every IPv4 address of link but keep.
func (p *Pod) removeOtherAddrs(link netlink.Link, keep *netlink.Addr) error {
	addrs, err := netlinkdump.Addrs(p.nl, link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if a.IPNet.String() == keep.IPNet.String() {
			continue
		}
		if err := p.nl.AddrDel(link, &a); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return fmt.Errorf("removing stale address %s from %s: %w", a.IPNet, link.Attrs().Name, err)
		}
	}
	return nil
}

func hostNet(ip net.IP) *net.IPNet {
	return &net.IPNet{IP: ip.To4(), Mask: net.CIDRMask(32, 32)}
}

func gatewayRoute(linkIndex int) *netlink.Route {
	return &netlink.Route{LinkIndex: linkIndex, Dst: hostNet(GatewayIP), Scope: netlink.SCOPE_LINK, Family: syscall.AF_INET}
}

func defaultRoute(linkIndex int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: linkIndex, Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		Gw: GatewayIP, Scope: netlink.SCOPE_UNIVERSE, Family: syscall.AF_INET,
	}
}

// hasRoute matches on what makes the route ours: destination, gateway and device.
func hasRoute(routes []netlink.Route, want *netlink.Route) bool {
	for _, r := range routes {
		dst := "0.0.0.0/0"
		if r.Family == syscall.AF_INET6 || want.Family == syscall.AF_INET6 {
			dst = "::/0"
		}
		if r.Dst != nil {
			dst = r.Dst.String()
		}
		if dst == want.Dst.String() && r.Gw.Equal(want.Gw) && r.LinkIndex == want.LinkIndex && r.Table == syscall.RT_TABLE_MAIN {
			return true
		}
	}
	return false
}
