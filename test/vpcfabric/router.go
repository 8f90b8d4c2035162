package vpcfabric

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// The vpc netns is the subnet router of every subnet at once: each ENI's veth ends there, holding the
// subnet's gateway address, and each private IP of the ENI is a /32 route through that veth. Strict
// reverse-path filtering then drops a packet whose source is not routed back through the veth it came
// in on, which is EC2's source/destination check.
//
// EC2 delivers a packet for any private IP or prefix of an ENI straight to that ENI, without ARP: its
// mapping service knows which ENI holds the address. A router that ARPed for a pod's address would wait
// forever, as nothing on a node answers for an address that lives in a pod. So every address of an ENI is
// routed via deliveryHop, onlink, on the ENI's veth, and each veth holds one permanent neighbour entry
// deliveryHop -> the ENI's MAC: one entry per ENI serves its IPs and its /28 prefixes alike, and the
// route alone says which addresses the ENI holds.
//
// The strict check is nftables' fib expression, not the kernel's rp_filter=1: the kernel applies
// rp_filter to ARP requests too, so with it the router ignores a node asking for the gateway's MAC from
// any address that is not one of that ENI's (a bare eth1 asks from the node's primary IP), while EC2's
// router answers every ARP request. For IP packets both checks drop exactly the same packets. IPv6 has no
// rp_filter at all: the same rule in an ip6 table is its source/destination check (an ENI's IPv6 addresses
// and /80 prefixes are routed through its veth like its IPv4 ones; link-local sources pass, each router
// link having its fe80::/64). The forward chain is the egress-only internet gateway of IPv6: the
// internet host reaches the VPC only in flows the VPC opened (IPv6 is never translated, so this, not a
// NAT, is what keeps the internet out).
const sourceCheckRuleset = `table ip ` + gateTable + ` {
	chain prerouting {
		type filter hook prerouting priority raw; policy accept;
		fib saddr . iif oif missing counter drop
	}
}
table ip6 ` + gateTable + ` {
	chain prerouting {
		type filter hook prerouting priority raw; policy accept;
		fib saddr . iif oif missing counter drop
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "inet" ct state != { established, related } counter drop
	}
}
`

// serveEndpoints puts IMDS and the EC2 API on the router's lo, where every node reaches them through its
// primary ENI as an instance reaches EC2's link-local endpoints: nothing listens in a node, so a node's
// hostNetwork pod may take any port (port 80 included). IMDS's token answers leave with the instance's hop
// limit as their TTL: the router's own packets are not decremented, the node receives them at 1, and each
// router on from there (the node's host stack forwarding to a pod) lowers it.
func (f *Fabric) serveEndpoints() error {
	lo, err := f.vpc.nl.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("serving IMDS and EC2: finding the router's lo: %w", err)
	}
	for _, a := range []netip.Addr{imdsAddr, ec2Addr} {
		// Scope host: local to the router, never the source of what it forwards or answers ARP with.
		addr := &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, 32)), Scope: int(netlink.SCOPE_HOST)}
		if err := f.vpc.nl.AddrReplace(lo, addr); err != nil {
			return fmt.Errorf("serving IMDS and EC2: adding %s to the router's lo: %w", a, err)
		}
	}
	if err := f.vpc.serve(netip.AddrPortFrom(imdsAddr, 80), f.sim.IMDSHandlerBySource(), ec2sim.IMDSConnContext); err != nil {
		return fmt.Errorf("serving IMDS: %w", err)
	}
	if err := f.vpc.serve(netip.AddrPortFrom(ec2Addr, 80), f.sim.EC2Handler(), nil); err != nil {
		return fmt.Errorf("serving EC2: %w", err)
	}
	return nil
}

// routerSysctls make the vpc netns forward, leave source filtering to nftables (see above), and answer
// ARP for addresses behind other veths (as the VPC router answers for every address, so two nodes of one
// subnet reach each other). rp_filter is set explicitly because a new netns inherits the host's value.
var routerSysctls = [][2]string{
	{"net/ipv4/ip_forward", "1"},
	{"net/ipv6/conf/all/forwarding", "1"},
	{"net/ipv4/conf/all/rp_filter", "0"},
	{"net/ipv4/conf/default/rp_filter", "0"},
	{"net/ipv4/conf/all/send_redirects", "0"},
	{"net/ipv4/conf/default/send_redirects", "0"},
	{"net/ipv4/conf/default/proxy_arp", "1"},
}

// linkSysctls are set on every router-side link as it is made; proxy_delay 0 because the kernel otherwise
// delays proxied ARP answers by up to 0.8 s.
func linkSysctls(dev string) [][2]string {
	return [][2]string{
		{"net/ipv4/conf/" + dev + "/rp_filter", "0"},
		{"net/ipv4/conf/" + dev + "/proxy_arp", "1"},
		{"net/ipv4/conf/" + dev + "/send_redirects", "0"},
		{"net/ipv4/neigh/" + dev + "/proxy_delay", "0"},
	}
}

// deliveryHop is the next hop of every route to an ENI's addresses: link-local, never an address of any
// namespace, and meaningful only through each ENI veth's permanent neighbour entry. deliveryHop6 is
// IPv6's (an ENI's IPv6 addresses and /80 prefixes).
var (
	deliveryHop  = netip.MustParseAddr("169.254.0.1")
	deliveryHop6 = netip.MustParseAddr("fe80::e1:1")
)

// deliveryHopFor is the delivery hop of dst's family.
func deliveryHopFor(dst netip.Prefix) netip.Addr {
	if dst.Addr().Is4() {
		return deliveryHop
	}
	return deliveryHop6
}

// routerLinkName names the vpc-side end of an ENI's veth: 15 bytes at most, derived from the ENI id so
// the same ENI always maps to the same name.
func routerLinkName(eniID string) string {
	h := fnv.New64a()
	h.Write([]byte(eniID))
	return fmt.Sprintf("e%014x", h.Sum64()&(1<<56-1))
}

// Host is a machine hanging off the router in a netns of its own: the remote VPC host, the internet host or
// the on-premises host.
type Host struct {
	// Netns is the namespace's name (for `ip netns exec`), NetnsPath its path (for Do, Listen, DialContext).
	Netns, NetnsPath string
	IP               netip.Addr
	// Prefix is the host's on-link network; the router holds its first address.
	Prefix netip.Prefix
	// IPv6 is the host's IPv6 address (the router holds its /64's first address).
	IPv6 netip.Addr
}

// addHostIPv6 gives a host (its netns n, wired to the router by routerLink) an IPv6 address: the router
// holds the prefix's first address, the host a default route via it. No duplicate address detection: the
// addresses are the fabric's to give.
func (f *Fabric) addHostIPv6(n *namespace, routerLink string, addr netip.Prefix) error {
	gw := addr.Masked().Addr().Next()
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	if err := f.vpc.nl.AddrReplace(link, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(gw, addr.Bits())), Flags: unix.IFA_F_NODAD}); err != nil {
		return fmt.Errorf("adding %s to router link %s: %w", gw, routerLink, err)
	}
	eth0, err := n.nl.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("finding eth0 in netns %s: %w", n.name, err)
	}
	if err := n.nl.AddrReplace(eth0, &netlink.Addr{IPNet: ipNet(addr), Flags: unix.IFA_F_NODAD}); err != nil {
		return fmt.Errorf("adding %s in netns %s: %w", addr, n.name, err)
	}
	def := &netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("::/0")), Gw: gw.AsSlice()}
	if err := n.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("adding the IPv6 default route via %s in netns %s: %w", gw, n.name, err)
	}
	return nil
}

// addHost creates a netns for a host at addr (an address with its prefix length), wires it to the router
// with a veth named routerLink on the router side, and gives it a default route via the router.
func (f *Fabric) addHost(suffix, routerLink string, addr netip.Prefix) (*namespace, Host, error) {
	gw := addr.Masked().Addr().Next()
	if gw == addr.Addr() {
		return nil, Host{}, fmt.Errorf("adding host %s: %s is the router's address in %s: %w", suffix, addr.Addr(), addr.Masked(), ErrInvalidOptions)
	}
	hn, err := newNamespace(f.opts.Name + "-" + suffix)
	if err != nil {
		return nil, Host{}, err
	}
	fail := func(err error) (*namespace, Host, error) {
		hn.remove()
		return nil, Host{}, fmt.Errorf("adding host %s: %w", suffix, err)
	}
	if err := f.addVeth(routerLink, hn, "eth0", nil); err != nil {
		return fail(err)
	}
	if err := f.routerAddr(routerLink, netip.PrefixFrom(gw, addr.Bits()), false); err != nil {
		return fail(err)
	}
	if err := hostSide(hn, "eth0", addr, gw); err != nil {
		return fail(err)
	}
	return hn, Host{Netns: hn.name, NetnsPath: hn.path(), IP: addr.Addr(), Prefix: addr.Masked()}, nil
}

// addVeth creates a veth pair whose end routerLink sits in the vpc netns (up, router sysctls set) and
// whose other end is peerName in peer, with mac when given.
func (f *Fabric) addVeth(routerLink string, peer *namespace, peerName string, mac net.HardwareAddr) error {
	ph, err := peer.handle()
	if err != nil {
		return err
	}
	defer ph.Close()
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: routerLink, MTU: f.opts.MTU},
		PeerName:         peerName,
		PeerHardwareAddr: mac,
		PeerNamespace:    netlink.NsFd(ph),
	}
	if err := f.vpc.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s/%s: %w", routerLink, peerName, err)
	}
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err == nil {
		err = f.vpc.nl.LinkSetUp(link)
	}
	if err != nil {
		return fmt.Errorf("bringing router link %s up: %w", routerLink, err)
	}
	if err := writeSysctls(f.vpc.path(), linkSysctls(routerLink)); err != nil {
		return fmt.Errorf("configuring router link %s: %w", routerLink, err)
	}
	return nil
}

// routerAddr puts addr on a router link. With onlyHost the address is a /32 without a prefix route: every
// ENI veth of a subnet holds the same gateway address, and the subnet's addresses are reached by /32 routes.
func (f *Fabric) routerAddr(routerLink string, addr netip.Prefix, onlyHost bool) error {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	a := &netlink.Addr{IPNet: ipNet(addr)}
	if onlyHost {
		a.IPNet = ipNet(netip.PrefixFrom(addr.Addr(), 32))
		a.Flags = unix.IFA_F_NOPREFIXROUTE
	}
	if err := f.vpc.nl.AddrReplace(link, a); err != nil {
		return fmt.Errorf("adding %s to router link %s: %w", addr, routerLink, err)
	}
	return nil
}

// hostSide configures the far end of a veth as DHCP would: up, the address with its prefix, a default
// route via the gateway.
func hostSide(n *namespace, dev string, addr netip.Prefix, gw netip.Addr) error {
	link, err := n.nl.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("finding %s in netns %s: %w", dev, n.name, err)
	}
	if err := n.nl.AddrReplace(link, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
		return fmt.Errorf("adding %s to %s in netns %s: %w", addr, dev, n.name, err)
	}
	if err := n.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up in netns %s: %w", dev, n.name, err)
	}
	def := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: gw.AsSlice()}
	if err := n.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("adding default route via %s in netns %s: %w", gw, n.name, err)
	}
	return nil
}

// routerIPv6 is the router's link-local address on every ENI's veth, the IPv6 next hop a node's router
// advertisements would name (the VPC's router is a link-local neighbour of every ENI).
var routerIPv6 = netip.MustParseAddr("fe80::1")

// routerLinkLocal puts routerIPv6 on a router link (no duplicate address detection: it is the router's on
// every link, and no node holds it).
func (f *Fabric) routerLinkLocal(routerLink string) error {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	a := &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(routerIPv6, 64)), Flags: unix.IFA_F_NODAD}
	if err := f.vpc.nl.AddrReplace(link, a); err != nil {
		return fmt.Errorf("adding %s to router link %s: %w", routerIPv6, routerLink, err)
	}
	return nil
}

// ipv6DefaultRoute gives a node's primary ENI the IPv6 default route a router advertisement would: via
// the router's link-local address.
func ipv6DefaultRoute(n *namespace, dev string) error {
	link, err := n.nl.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("finding %s in netns %s: %w", dev, n.name, err)
	}
	def := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("::/0")), Gw: routerIPv6.AsSlice()}
	if err := n.nl.RouteReplace(def); err != nil {
		return fmt.Errorf("adding the IPv6 default route via %s in netns %s: %w", routerIPv6, n.name, err)
	}
	return nil
}

// deliverTo makes the router reach deliveryHop on a router link at the ENI's MAC, permanently, so that
// the routes via it never trigger ARP.
func (f *Fabric) deliverTo(routerLink string, mac net.HardwareAddr) error {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	for _, hop := range []netip.Addr{deliveryHop, deliveryHop6} {
		family := netlink.FAMILY_V4
		if hop.Is6() {
			family = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family, State: netlink.NUD_PERMANENT,
			IP: hop.AsSlice(), HardwareAddr: mac}
		if err := f.vpc.nl.NeighSet(n); err != nil {
			return fmt.Errorf("mapping %s to %s on router link %s: %w", hop, mac, routerLink, err)
		}
	}
	return nil
}

// deliveryRoute is the route to dst (an ENI's IP or prefix) through a router link.
func deliveryRoute(linkIndex int, dst netip.Prefix) *netlink.Route {
	return &netlink.Route{LinkIndex: linkIndex, Dst: ipNet(dst), Gw: deliveryHopFor(dst).AsSlice(), Flags: int(netlink.FLAG_ONLINK)}
}

// routeVia makes dst reachable through a router link (an ENI's IP or prefix), delivered to the ENI's MAC
// without ARP (see deliverTo).
func (f *Fabric) routeVia(routerLink string, dst netip.Prefix) error {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	if err := f.vpc.nl.RouteReplace(deliveryRoute(link.Attrs().Index, dst)); err != nil {
		return fmt.Errorf("routing %s via %s: %w", dst, routerLink, err)
	}
	return nil
}

// unroute removes the route to dst through a router link; a route already gone is fine.
func (f *Fabric) unroute(routerLink string, dst netip.Prefix) error {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	if err := f.vpc.nl.RouteDel(deliveryRoute(link.Attrs().Index, dst)); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("removing route %s via %s: %w", dst, routerLink, err)
	}
	return nil
}

// deleteRouterLink removes an ENI's veth (both ends); the routes through it and its neighbour entry go
// with it.
func (f *Fabric) deleteRouterLink(routerLink string) error {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	if err := f.vpc.nl.LinkDel(link); err != nil {
		return fmt.Errorf("deleting router link %s: %w", routerLink, err)
	}
	return nil
}

// routes lists the destinations routed through a router link, for tests and for Routes.
func (f *Fabric) routesVia(routerLink string) ([]netip.Prefix, error) {
	link, err := f.vpc.nl.LinkByName(routerLink)
	if err != nil {
		return nil, fmt.Errorf("finding router link %s: %w", routerLink, err)
	}
	rs, err := f.vpc.nl.RouteList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing routes via %s: %w", routerLink, err)
	}
	var out []netip.Prefix
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		// The delivery routes only, not the kernel's own (an IPv6 link's fe80::/64).
		if p, ok := prefixOf(r.Dst); ok && r.Gw.Equal(deliveryHopFor(p).AsSlice()) {
			out = append(out, p)
		}
	}
	return out, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}
