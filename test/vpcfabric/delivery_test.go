package vpcfabric

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// podBehind stands for a pod on the node, plumbed as the CNI plugin does it: a veth from the node, the
// pod's addresses on its eth0, a default route via a link-local gateway with a permanent neighbour entry,
// and in the node a /32 route per address to the veth. The node does not answer ARP for these addresses
// (they are not its own), so only a router that delivers to the ENI's MAC without ARP reaches them.
type podBehind struct {
	ns       *namespace
	nodeLink netlink.Link // the veth's node end
}

// newPodBehind makes the pod; it lives until owner (the test that spans the steps using it) ends.
func newPodBehind(t *testing.T, owner testing.TB, w *world, node *netlink.Handle) *podBehind {
	t.Helper()
	n, err := newNamespace(w.fab.Name() + "-pod")
	if err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() { _ = n.remove() })
	h, err := n.handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "podveth"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(h)}
	if err := node.LinkAdd(veth); err != nil {
		t.Fatalf("creating the pod's veth: %v", err)
	}
	nodeLink, err := node.LinkByName("podveth")
	if err == nil {
		err = node.LinkSetUp(nodeLink)
	}
	if err != nil {
		t.Fatalf("bringing the pod's veth up: %v", err)
	}
	if err := writeSysctls(w.node.NetnsPath, [][2]string{{"net/ipv4/ip_forward", "1"}}); err != nil {
		t.Fatal(err)
	}
	eth0, err := n.nl.LinkByName("eth0")
	if err == nil {
		err = n.nl.LinkSetUp(eth0)
	}
	if err != nil {
		t.Fatalf("bringing the pod's eth0 up: %v", err)
	}
	gw := netip.MustParseAddr("169.254.1.1")
	for _, r := range []*netlink.Route{
		{LinkIndex: eth0.Attrs().Index, Dst: ipNet(netip.PrefixFrom(gw, 32)), Scope: netlink.SCOPE_LINK},
		{LinkIndex: eth0.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: gw.AsSlice()},
	} {
		if err := n.nl.RouteReplace(r); err != nil {
			t.Fatalf("routing in the pod: %v", err)
		}
	}
	if err := n.nl.NeighSet(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: gw.AsSlice(), HardwareAddr: nodeLink.Attrs().HardwareAddr}); err != nil {
		t.Fatalf("adding the pod's gateway neighbour: %v", err)
	}
	return &podBehind{ns: n, nodeLink: nodeLink}
}

// hold gives the pod ip and makes the node route it to the pod's veth.
func (p *podBehind) hold(t *testing.T, node *netlink.Handle, ip netip.Addr) {
	t.Helper()
	eth0, err := p.ns.nl.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ns.nl.AddrReplace(eth0, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(ip, 32))}); err != nil {
		t.Fatalf("adding %s to the pod: %v", ip, err)
	}
	r := &netlink.Route{LinkIndex: p.nodeLink.Attrs().Index, Dst: ipNet(netip.PrefixFrom(ip, 32)), Scope: netlink.SCOPE_LINK}
	if err := node.RouteReplace(r); err != nil {
		t.Fatalf("routing %s to the pod in the node: %v", ip, err)
	}
}

// routerNeighbours lists the router's neighbour entries on the ENI's veth.
func routerNeighbours(t *testing.T, f *Fabric, eniID string) []netlink.Neigh {
	t.Helper()
	var out []netlink.Neigh
	err := f.withRouterLink(eniID, func(name string) error {
		link, err := f.vpc.nl.LinkByName(name)
		if err != nil {
			return err
		}
		out, err = f.vpc.nl.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
		return err
	})
	if err != nil {
		t.Fatalf("listing the router's neighbours towards %s: %v", eniID, err)
	}
	return out
}

// checkDelivery asserts that the router maps the ENI's addresses to its MAC with one permanent entry and
// has never tried to resolve any of ips (an ARP attempt would leave an entry, if only a failed one).
func checkDelivery(t *testing.T, f *Fabric, eniID, mac string, ips ...netip.Addr) {
	t.Helper()
	hop := false
	for _, n := range routerNeighbours(t, f, eniID) {
		a, _ := netip.AddrFromSlice(n.IP)
		a = a.Unmap()
		switch {
		case a == deliveryHop:
			hop = n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == mac
			if !hop {
				t.Errorf("the router's entry for %s is %s state %#x, want %s permanent", deliveryHop, n.HardwareAddr, n.State, mac)
			}
		case slices.Contains(ips, a):
			t.Errorf("the router has a neighbour entry for %s (%s, state %#x): it tried ARP", a, n.HardwareAddr, n.State)
		}
	}
	if !hop {
		t.Errorf("the router has no permanent entry %s -> %s on the ENI's veth", deliveryHop, mac)
	}
}
