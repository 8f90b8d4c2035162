// Package vpcfabric turns the state of a simulated EC2 account (test/ec2sim) into kernel objects, so that
// the agent and its datapath run against something that forwards and filters packets like a VPC.
//
// Layout, all in network namespaces named after Options.Name:
//
//	<name>-<instance-id>  one per instance (the node). Each attached ENI is a veth whose node end carries the
//	                      ENI's MAC: eth0 (device index 0) configured as DHCP would, eth<N> left down and bare.
//	                      Nothing of the fabric listens inside: every port is the node's own.
//	<name>-vpc            the router of every subnet of every CIDR block of the VPC (secondary blocks such as
//	                      100.64.0.0/16 included): the other end of every ENI veth holds its subnet's gateway as a /32,
//	                      each private IP (and prefix) of the ENI is a route through it to the ENI's MAC with
//	                      no ARP, as EC2 maps addresses to ENIs, a strict reverse-path check
//	                      drops packets whose source is not an address of the ENI they came from (EC2's
//	                      source/dest check), while ARP for the gateway is answered from any sender, as on EC2.
//	                      IMDS listens on 169.254.169.254:80 and the EC2 API on 169.254.169.253:80, both on its
//	                      lo: a node reaches them through its default route, and IMDS answers as the instance
//	                      whose ENI holds the caller's address (a pod's, SNATed or not, is its node's ENI's),
//	                      its token answers with the instance's hop limit as their TTL.
//	                      Every ENI's security groups are enforced there, statefully (secgroups.go).
//	<name>-vpchost        a remote host inside the VPC, unfiltered unless given security groups.
//	<name>-inet           an internet host that accepts only packets from a node's primary IP.
//	<name>-onprem         a host outside the VPC's CIDRs that the router reaches both ways, as over a VPN or
//	                      a peering: it opens connections to pods by their own addresses.
package vpcfabric

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// Where a process inside a node netns finds AWS: the IMDS SDK default, and the EC2 endpoint to pass as
// AWS_ENDPOINT_URL_EC2.
const (
	IMDSURL = "http://169.254.169.254"
	EC2URL  = "http://169.254.169.253"
)

var (
	imdsAddr = netip.MustParseAddr("169.254.169.254")
	ec2Addr  = netip.MustParseAddr("169.254.169.253")
)

// Errors callers branch on.
var (
	ErrClosed         = errors.New("fabric closed")
	ErrUnknownNode    = errors.New("no such node")
	ErrUnknownENI     = errors.New("no such ENI in the fabric")
	ErrInvalidOptions = errors.New("invalid fabric options")
)

// Options shape a fabric. Zero values take the defaults.
type Options struct {
	// Name prefixes every netns the fabric makes, so parallel runs do not collide (default "ewf<pid>-<rand>").
	// Cleanup(Name) removes what a crashed run left.
	Name string
	// VPCHost is the remote VPC host's address with its prefix length (default 10.0.255.10/24; pick a range
	// inside the VPC CIDR and outside its subnets). The router takes the prefix's first address.
	VPCHost string
	// Internet is the internet host's address with its prefix (default 198.51.100.10/24).
	Internet string
	// VPCHostIPv6 and InternetIPv6 are the same hosts' IPv6 addresses with their prefixes (defaults
	// 2600:1f14:e0:ff::10/64, inside what tests seed as the VPC's /56, and 2001:db8:1::10/64). The router
	// takes each prefix's first address; the internet host sits behind an egress-only internet gateway.
	VPCHostIPv6, InternetIPv6 string
	// OnPremises is the on-premises host's address with its prefix (default 192.0.2.10/24), outside the VPC.
	OnPremises string
	// MTU of every veth (default 9001, as on EC2 instances).
	MTU int
	// Logger receives one line per change the fabric makes; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = fmt.Sprintf("ewf%d-%03x", os.Getpid(), rand.IntN(1<<12))
	}
	if o.VPCHost == "" {
		o.VPCHost = "10.0.255.10/24"
	}
	if o.Internet == "" {
		o.Internet = "198.51.100.10/24"
	}
	if o.VPCHostIPv6 == "" {
		o.VPCHostIPv6 = "2600:1f14:e0:ff::10/64"
	}
	if o.InternetIPv6 == "" {
		o.InternetIPv6 = "2001:db8:1::10/64"
	}
	if o.OnPremises == "" {
		o.OnPremises = "192.0.2.10/24"
	}
	if o.MTU == 0 {
		o.MTU = 9001
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Fabric is a running simulated VPC. Its methods are safe for concurrent use.
type Fabric struct {
	sim  *ec2sim.Sim
	opts Options
	log  *slog.Logger

	vpc, vpchost, inet, onprem    *namespace
	vpcHost, internet, onPremises Host

	cancel    func()
	loopDone  chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	closed  bool
	nodes   map[string]*node
	enis    map[string]*eniState
	sg      *securityGroups
	routes  map[netip.Prefix]string // destination -> ENI id whose veth carries it
	changed chan struct{}           // closed and replaced on every applied change
	errs    []error
}

// eniState is one attached ENI as the fabric has wired it.
type eniState struct {
	id, instanceID, mac string
	deviceIndex         int
	routerLink          string
	nodeLink            string
	gateway             netip.Addr
	dsts                map[netip.Prefix]bool
	groups              []string // the security groups it carries
}

// vpcHostLink is the router's link to the VPC host.
const vpcHostLink = "vpchost"

// New builds the router, the VPC host and the internet host, wires every running instance of sim, then
// follows sim's events in order on a goroutine until Close or ctx ends. Secondary ENIs and IPs that already
// existed when New was called are not seen (the simulator offers no snapshot of them): start the fabric
// before the agents.
func New(ctx context.Context, sim *ec2sim.Sim, opts Options) (_ *Fabric, err error) {
	opts = opts.withDefaults()
	vpcHost, err := netip.ParsePrefix(opts.VPCHost)
	if err != nil || !vpcHost.Addr().Is4() {
		return nil, fmt.Errorf("parsing VPC host %q: %w", opts.VPCHost, ErrInvalidOptions)
	}
	inetHost, err := netip.ParsePrefix(opts.Internet)
	if err != nil || !inetHost.Addr().Is4() {
		return nil, fmt.Errorf("parsing internet host %q: %w", opts.Internet, ErrInvalidOptions)
	}
	f := &Fabric{
		sim: sim, opts: opts, log: opts.Logger.With("fabric", opts.Name),
		loopDone: make(chan struct{}),
		nodes:    map[string]*node{},
		enis:     map[string]*eniState{},
		routes:   map[netip.Prefix]string{},
		changed:  make(chan struct{}),
	}
	defer func() {
		if err != nil {
			close(f.loopDone)
			f.teardown()
		}
	}()
	if f.vpc, err = newNamespace(opts.Name + "-vpc"); err != nil {
		return nil, err
	}
	if err := writeSysctls(f.vpc.path(), routerSysctls); err != nil {
		return nil, fmt.Errorf("configuring the router: %w", err)
	}
	if err := f.installSourceCheck(); err != nil {
		return nil, err
	}
	if err := f.installSecurityGroups(); err != nil {
		return nil, err
	}
	if f.vpchost, f.vpcHost, err = f.addHost("vpchost", vpcHostLink, vpcHost); err != nil {
		return nil, err
	}
	if f.inet, f.internet, err = f.addHost("inet", "inet", inetHost); err != nil {
		return nil, err
	}
	for _, h := range []struct {
		n       *namespace
		host    *Host
		link    string
		address string
	}{{f.vpchost, &f.vpcHost, vpcHostLink, opts.VPCHostIPv6}, {f.inet, &f.internet, "inet", opts.InternetIPv6}} {
		a, err := netip.ParsePrefix(h.address)
		if err != nil || !a.Addr().Is6() {
			return nil, fmt.Errorf("parsing IPv6 host %q: %w", h.address, ErrInvalidOptions)
		}
		if err := f.addHostIPv6(h.n, h.link, a); err != nil {
			return nil, err
		}
		h.host.IPv6 = a.Addr()
	}
	if err := f.installGate(); err != nil {
		return nil, err
	}
	if err := f.addOnPremises(); err != nil {
		return nil, err
	}
	if err := f.serveEndpoints(); err != nil {
		return nil, err
	}

	// Subscribe before reading the instances so nothing falls between; applying is idempotent, so what
	// both show is applied twice without harm.
	events, cancel := sim.Subscribe(64)
	f.cancel = cancel
	for _, inst := range sim.Instances() {
		if inst.State != "running" {
			continue
		}
		if err := f.apply(ec2sim.InstanceAdded{Instance: inst}); err != nil {
			cancel()
			return nil, err
		}
		if err := f.apply(primaryAttached(inst)); err != nil {
			cancel()
			return nil, err
		}
	}
	go f.follow(ctx, events)
	f.log.Info("fabric up", "vpchost", f.vpcHost.IP, "internet", f.internet.IP)
	return f, nil
}

// primaryAttached is the ENIAttached the simulator emitted for an instance's primary ENI before the
// fabric subscribed.
func primaryAttached(inst ec2sim.Instance) ec2sim.ENIAttached {
	ev := ec2sim.ENIAttached{InstanceID: inst.ID, ENIID: inst.PrimaryENI, MAC: inst.PrimaryMAC,
		SubnetID: inst.SubnetID, SubnetCIDR: inst.SubnetCIDR, PrimaryIP: inst.PrimaryIP, IPs: []string{inst.PrimaryIP}}
	if p, err := netip.ParsePrefix(inst.SubnetCIDR); err == nil {
		ev.Gateway = p.Masked().Addr().Next().String() // EC2's router is the subnet's first host address
	}
	return ev
}

func (f *Fabric) follow(ctx context.Context, events <-chan ec2sim.Event) {
	defer close(f.loopDone)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if err := f.apply(ev); err != nil {
				f.log.Error("applying simulator event failed", "event", ev.EventKind(), "err", err)
			}
		}
	}
}

// apply turns one simulator event into kernel changes. Events come from one goroutine, in order.
func (f *Fabric) apply(ev ec2sim.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	var err error
	switch e := ev.(type) {
	case ec2sim.InstanceAdded:
		err = f.addNodeLocked(e.Instance)
	case ec2sim.ENIAttached:
		err = f.attachLocked(e)
	case ec2sim.ENIDetached:
		err = f.detachLocked(e.ENIID)
	case ec2sim.IPsAssigned:
		err = f.assignLocked(e.ENIID, slices.Concat(e.IPs, e.IPv6s), slices.Concat(e.Prefixes, e.IPv6Prefixes))
	case ec2sim.IPsUnassigned:
		err = f.unassignLocked(e.ENIID, slices.Concat(e.IPs, e.IPv6s), slices.Concat(e.Prefixes, e.IPv6Prefixes))
	case ec2sim.InstanceTerminated:
		err = f.removeNodeLocked(e.InstanceID)
	case ec2sim.SecurityGroupChanged, ec2sim.ENISecurityGroupsChanged:
		f.noteGroupEventLocked(ev)
	}
	// Any event may change what the groups admit: an ENI's groups or addresses, a group's rules.
	err = errors.Join(err, f.enforceLocked())
	if err != nil {
		err = fmt.Errorf("applying %s: %w", ev.EventKind(), err)
		f.errs = append(f.errs, err)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return err
}

// Err reports every event the fabric failed to apply so far (nil when all were applied).
func (f *Fabric) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

// waitFor blocks until cond (called with f.mu held) holds, ctx ends or the fabric closes.
func (f *Fabric) waitFor(ctx context.Context, what string, cond func() bool) error {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return fmt.Errorf("waiting for %s: %w", what, ErrClosed)
		}
		ok, ch, applyErr := cond(), f.changed, errors.Join(f.errs...)
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, errors.Join(ctx.Err(), applyErr))
		}
	}
}

// WaitNode blocks until the instance's node netns exists with its primary ENI wired as eth0, and returns
// it. (The simulator reports the instance and its primary ENI as two events, so the netns alone can still
// lack eth0.)
func (f *Fabric) WaitNode(ctx context.Context, instanceID string) (Node, error) {
	if err := f.waitFor(ctx, "node "+instanceID, func() bool {
		n := f.nodes[instanceID]
		return n != nil && n.links[n.inst.PrimaryMAC] != ""
	}); err != nil {
		return Node{}, err
	}
	return f.Node(instanceID)
}

// WaitENI blocks until the ENI with this MAC is a link in the instance's node netns.
func (f *Fabric) WaitENI(ctx context.Context, instanceID, mac string) error {
	return f.waitFor(ctx, "ENI "+mac+" on "+instanceID, func() bool {
		n := f.nodes[instanceID]
		return n != nil && n.links[mac] != ""
	})
}

// WaitENIGone blocks until no ENI with this MAC is wired to the instance.
func (f *Fabric) WaitENIGone(ctx context.Context, instanceID, mac string) error {
	return f.waitFor(ctx, "ENI "+mac+" gone from "+instanceID, func() bool {
		n := f.nodes[instanceID]
		return n == nil || n.links[mac] == ""
	})
}

// WaitIP blocks until the router routes ip to an ENI, as a secondary IP (/32) or within a /28 prefix.
func (f *Fabric) WaitIP(ctx context.Context, ip netip.Addr) error {
	return f.waitFor(ctx, "route to "+ip.String(), func() bool { return f.routedLocked(ip) })
}

// WaitIPGone blocks until the router no longer routes ip to any ENI.
func (f *Fabric) WaitIPGone(ctx context.Context, ip netip.Addr) error {
	return f.waitFor(ctx, "no route to "+ip.String(), func() bool { return !f.routedLocked(ip) })
}

// routedLocked reports whether a route of the router covers ip (f.mu held).
func (f *Fabric) routedLocked(ip netip.Addr) bool {
	for dst, eni := range f.routes {
		if eni != "" && dst.Contains(ip) {
			return true
		}
	}
	return false
}

// RouteOf says which ENI the router sends dst to, as the fabric applied it ("" when none).
func (f *Fabric) RouteOf(dst netip.Prefix) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routes[dst]
}

// RouterRoutes lists, as the kernel has them, the destinations the router sends through the ENI's veth.
func (f *Fabric) RouterRoutes(eniID string) (routes []netip.Prefix, err error) {
	err = f.withRouterLink(eniID, func(link string) error {
		routes, err = f.routesVia(link)
		return err
	})
	return routes, err
}

// ENICounters reads the packet counters of the ENI's veth on the router side: rx counts packets the
// node sent out of the ENI and the router received (whether it then forwarded or dropped them), tx
// packets the router delivered to the ENI.
func (f *Fabric) ENICounters(eniID string) (rxPackets, txPackets uint64, err error) {
	err = f.withRouterLink(eniID, func(name string) error {
		link, err := f.vpc.nl.LinkByName(name)
		if err != nil {
			return fmt.Errorf("reading counters of ENI %s: %w", eniID, err)
		}
		st := link.Attrs().Statistics
		if st == nil {
			return fmt.Errorf("reading counters of ENI %s: link %s has no statistics", eniID, name)
		}
		rxPackets, txPackets = st.RxPackets, st.TxPackets
		return nil
	})
	return rxPackets, txPackets, err
}

// withRouterLink runs fn with the router-side link name of an ENI, holding the lock so that Close cannot
// pull the router away meanwhile.
func (f *Fabric) withRouterLink(eniID string, fn func(link string) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	e := f.enis[eniID]
	if e == nil {
		return fmt.Errorf("looking up ENI %s: %w", eniID, ErrUnknownENI)
	}
	return fn(e.routerLink)
}

func (f *Fabric) usable() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return nil
}

// VPCHost is the remote host inside the VPC.
func (f *Fabric) VPCHost() Host { return f.vpcHost }

// Internet is the host on the internet, reachable only from a node's primary IP.
func (f *Fabric) Internet() Host { return f.internet }

// Router is the vpc netns's name and path.
func (f *Fabric) Router() (name, path string) { return f.vpc.name, f.vpc.path() }

// Name is the prefix of every netns of this fabric.
func (f *Fabric) Name() string { return f.opts.Name }

// Close stops following the simulator and removes every listener, link and netns the fabric made. It is
// idempotent.
func (f *Fabric) Close() error {
	f.closeOnce.Do(func() {
		if f.cancel != nil {
			f.cancel()
		}
		<-f.loopDone
		f.closeErr = f.teardown()
		f.log.Info("fabric down")
	})
	return f.closeErr
}

func (f *Fabric) teardown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	close(f.changed)
	var errs []error
	for id, n := range f.nodes {
		errs = append(errs, n.close())
		delete(f.nodes, id)
	}
	for _, ns := range []*namespace{f.onprem, f.inet, f.vpchost, f.vpc} {
		if ns != nil {
			errs = append(errs, ns.remove())
		}
	}
	return errors.Join(errs...)
}

// SetVPCHostHopMTU sets the MTU of the router's link towards the VPC host: with it below the ENIs' 9001, a
// node's packets to the VPC host meet a smaller hop and the router answers ICMP fragmentation-needed, as a
// 1500-byte path inside a VPC (a peering, a VPN) does.
func (f *Fabric) SetVPCHostHopMTU(mtu int) error {
	if err := f.usable(); err != nil {
		return err
	}
	link, err := f.vpc.nl.LinkByName(vpcHostLink)
	if err != nil {
		return fmt.Errorf("finding the router's link to the VPC host: %w", err)
	}
	if err := f.vpc.nl.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("setting the MTU of the router's link to the VPC host: %w", err)
	}
	return nil
}
