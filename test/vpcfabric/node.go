package vpcfabric

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os/exec"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// Node is what a test or the agent's harness needs to know about one simulated instance.
type Node struct {
	InstanceID string
	// Netns is the namespace's name (for `ip netns exec`), NetnsPath its path (for Do, Listen, DialContext).
	Netns, NetnsPath string
	PrimaryIP        netip.Addr
	PrimaryMAC       string
	// IMDSURL and EC2URL are where a process inside the netns finds IMDS (the SDK's default endpoint) and
	// the EC2 API (AWS_ENDPOINT_URL_EC2).
	IMDSURL, EC2URL string
	// Links maps each attached ENI's MAC to its link name in the netns (eth<device index>).
	Links map[string]string
}

// HTTPClient returns a client whose connections start inside the node's netns.
func (n Node) HTTPClient() *http.Client { return HTTPClient(n.NetnsPath) }

// Command prepares a process that runs inside the node's netns (through `ip netns exec`), with the EC2
// endpoint in its environment, as the agent would find it on EC2 plus the endpoint override.
func (n Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Netns, name}, args...)...)
	cmd.Env = append(cmd.Environ(), "AWS_ENDPOINT_URL_EC2="+n.EC2URL)
	return cmd
}

// node is the fabric's record of one node netns.
type node struct {
	inst  ec2sim.Instance
	ns    *namespace
	links map[string]string // MAC -> link name
}

func (n *node) view() Node {
	ip, _ := netip.ParseAddr(n.inst.PrimaryIP)
	return Node{InstanceID: n.inst.ID, Netns: n.ns.name, NetnsPath: n.ns.path(), PrimaryIP: ip, PrimaryMAC: n.inst.PrimaryMAC,
		IMDSURL: IMDSURL, EC2URL: EC2URL, Links: maps.Clone(n.links)}
}

// close deletes the node's netns.
func (n *node) close() error { return n.ns.remove() }

// Node returns the instance's node, or ErrUnknownNode when the fabric has not (yet) made it.
func (f *Fabric) Node(instanceID string) (Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Node{}, ErrClosed
	}
	n := f.nodes[instanceID]
	if n == nil {
		return Node{}, fmt.Errorf("looking up node %s: %w", instanceID, ErrUnknownNode)
	}
	return n.view(), nil
}

// Nodes lists every node, in no particular order.
func (f *Fabric) Nodes() []Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		out = append(out, n.view())
	}
	return out
}

// addNodeLocked makes the node netns and lets the node's primary IP through the internet gateway. The
// node reaches IMDS and the EC2 API through its primary ENI, at the router (serveEndpoints).
func (f *Fabric) addNodeLocked(inst ec2sim.Instance) (err error) {
	if f.nodes[inst.ID] != nil {
		return nil
	}
	ns, err := newNamespace(f.opts.Name + "-" + inst.ID)
	if err != nil {
		return fmt.Errorf("adding node %s: %w", inst.ID, err)
	}
	n := &node{inst: inst, ns: ns, links: map[string]string{}}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	if ip, perr := netip.ParseAddr(inst.PrimaryIP); perr == nil {
		if err := f.allowInternet(ip, true); err != nil {
			return fmt.Errorf("adding node %s: %w", inst.ID, err)
		}
	}
	f.nodes[inst.ID] = n
	f.log.Info("node added", "instance", inst.ID, "netns", ns.name, "ip", inst.PrimaryIP)
	return nil
}

func (f *Fabric) removeNodeLocked(instanceID string) error {
	n := f.nodes[instanceID]
	if n == nil {
		return nil
	}
	var errs []error
	for id, e := range f.enis {
		if e.instanceID == instanceID {
			errs = append(errs, f.detachLocked(id))
		}
	}
	if ip, err := netip.ParseAddr(n.inst.PrimaryIP); err == nil {
		errs = append(errs, f.allowInternet(ip, false))
	}
	errs = append(errs, n.close())
	delete(f.nodes, instanceID)
	f.log.Info("node removed", "instance", instanceID)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing node %s: %w", instanceID, err)
	}
	return nil
}

// attachLocked wires an ENI: a veth from the router to the node, named eth<device index> in the node with
// the ENI's MAC. The primary ENI is configured as DHCP would; others stay down and bare for the agent.
func (f *Fabric) attachLocked(ev ec2sim.ENIAttached) error {
	if e := f.enis[ev.ENIID]; e != nil {
		// Already wired (seen both in the instance list and as an event): only the IPs may be new.
		return f.assignLocked(ev.ENIID, ev.IPs, ev.Prefixes)
	}
	if f.nodes[ev.InstanceID] == nil {
		inst, err := f.sim.Instance(ev.InstanceID)
		if err != nil {
			return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
		}
		if err := f.addNodeLocked(inst); err != nil {
			return err
		}
	}
	n := f.nodes[ev.InstanceID]
	mac, err := net.ParseMAC(ev.MAC)
	if err != nil {
		return fmt.Errorf("attaching ENI %s: MAC %q: %w", ev.ENIID, ev.MAC, err)
	}
	subnet, err := netip.ParsePrefix(ev.SubnetCIDR)
	if err != nil {
		return fmt.Errorf("attaching ENI %s: subnet %q: %w", ev.ENIID, ev.SubnetCIDR, err)
	}
	gw, err := netip.ParseAddr(ev.Gateway)
	if err != nil {
		return fmt.Errorf("attaching ENI %s: gateway %q: %w", ev.ENIID, ev.Gateway, err)
	}
	e := &eniState{id: ev.ENIID, instanceID: ev.InstanceID, mac: ev.MAC, deviceIndex: ev.DeviceIndex,
		routerLink: routerLinkName(ev.ENIID), nodeLink: fmt.Sprintf("eth%d", ev.DeviceIndex), gateway: gw,
		dsts: map[netip.Prefix]bool{}}
	// ENIAttached does not carry the groups; later changes come as ENISecurityGroupsChanged.
	if st, ok := f.sim.ENI(ev.ENIID); ok {
		e.groups = st.Groups
	}
	if err := f.addVeth(e.routerLink, n.ns, e.nodeLink, mac); err != nil {
		f.deleteRouterLink(e.routerLink)
		return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
	}
	f.enis[ev.ENIID] = e
	n.links[ev.MAC] = e.nodeLink
	if err := f.routerAddr(e.routerLink, netip.PrefixFrom(gw, 32), true); err != nil {
		return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
	}
	if err := f.deliverTo(e.routerLink, mac); err != nil {
		return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
	}
	if err := f.routerLinkLocal(e.routerLink); err != nil {
		return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
	}
	if ev.DeviceIndex == 0 {
		ip, err := netip.ParseAddr(ev.PrimaryIP)
		if err != nil {
			return fmt.Errorf("attaching ENI %s: primary IP %q: %w", ev.ENIID, ev.PrimaryIP, err)
		}
		if err := hostSide(n.ns, e.nodeLink, netip.PrefixFrom(ip, subnet.Bits()), gw); err != nil {
			return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
		}
		if err := ipv6DefaultRoute(n.ns, e.nodeLink); err != nil {
			return fmt.Errorf("attaching ENI %s: %w", ev.ENIID, err)
		}
	}
	f.log.Info("ENI attached", "instance", ev.InstanceID, "eni", ev.ENIID, "mac", ev.MAC, "link", e.nodeLink,
		"router_link", e.routerLink)
	return f.assignLocked(ev.ENIID, ev.IPs, ev.Prefixes)
}

// detachLocked removes an ENI's veth; the routes through it and the neighbour entry that delivers them go
// with it.
func (f *Fabric) detachLocked(eniID string) error {
	e := f.enis[eniID]
	if e == nil {
		return nil
	}
	if err := f.deleteRouterLink(e.routerLink); err != nil {
		return fmt.Errorf("detaching ENI %s: %w", eniID, err)
	}
	for dst := range e.dsts {
		if f.routes[dst] == eniID {
			delete(f.routes, dst)
		}
	}
	delete(f.enis, eniID)
	if n := f.nodes[e.instanceID]; n != nil {
		delete(n.links, e.mac)
	}
	f.log.Info("ENI detached", "instance", e.instanceID, "eni", eniID, "link", e.nodeLink)
	return nil
}

// assignLocked routes each IP (as a /32) and each prefix through the ENI's veth, to the ENI's MAC without
// ARP (see deliverTo). IPs of an ENI the fabric has not wired (not attached) wait for its ENIAttached,
// which lists them all.
func (f *Fabric) assignLocked(eniID string, ips, prefixes []string) error {
	e := f.enis[eniID]
	if e == nil {
		return nil
	}
	dsts, err := parseDsts(ips, prefixes)
	if err != nil {
		return fmt.Errorf("assigning to ENI %s: %w", eniID, err)
	}
	for _, d := range dsts {
		if err := f.routeVia(e.routerLink, d); err != nil {
			return fmt.Errorf("assigning to ENI %s: %w", eniID, err)
		}
		e.dsts[d] = true
		f.routes[d] = eniID
	}
	if len(dsts) > 0 {
		f.log.Info("routes added", "eni", eniID, "dsts", dsts)
	}
	return nil
}

func (f *Fabric) unassignLocked(eniID string, ips, prefixes []string) error {
	e := f.enis[eniID]
	if e == nil {
		return nil
	}
	dsts, err := parseDsts(ips, prefixes)
	if err != nil {
		return fmt.Errorf("unassigning from ENI %s: %w", eniID, err)
	}
	for _, d := range dsts {
		if err := f.unroute(e.routerLink, d); err != nil {
			return fmt.Errorf("unassigning from ENI %s: %w", eniID, err)
		}
		delete(e.dsts, d)
		if f.routes[d] == eniID {
			delete(f.routes, d)
		}
	}
	if len(dsts) > 0 {
		f.log.Info("routes removed", "eni", eniID, "dsts", dsts)
	}
	return nil
}

func parseDsts(ips, prefixes []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ips)+len(prefixes))
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("parsing IP %q: %w", s, err)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	for _, s := range prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("parsing prefix %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
