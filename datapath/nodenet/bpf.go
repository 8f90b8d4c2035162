package nodenet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/hostroute"
	"github.com/eniwire/eniwire/datapath/snat"
	"github.com/vishvananda/netlink"
)

// BPF is the production dptypes.Driver: the tc programs steer pod packets by the pods and ENIs maps, and a
// /32 host route per pod lets the host stack (kube-proxy, SNAT replies) reach the pod.
//
// A secondary ENI gets its own primary IP as a /32 and no ip rule. The programs would not need it:
// bpf_redirect_neigh resolves the gateway on a bare link and to_pod runs before the IP stack. The host stack
// does: the reply of a flow it translated (a Service IP DNAT'ed to a VPC host) comes back on the pod's ENI
// and is routed by the kernel, whose reverse-path check (in any mode but off) rejects every packet arriving
// on an interface without an IPv4 address unless its source routes back through it. A /32 adds no
// connected route (the main table is unchanged, so no rule is needed), only the local address, and with
// rp_filter loose on the ENI that reply is accepted.
type BPF struct {
	dp     *datapath.Datapath
	addrs  *nodeAddrs
	nat    *snat.Manager
	routes *hostroute.Routes
	imds   IMDS
	mtu    int
	log    *slog.Logger
	// sysctlRoot is Config.SysctlRoot.
	sysctlRoot string

	mu   sync.Mutex
	enis map[string]int // ENI id -> ifindex, for ENIDown after the interface vanished

	egressPolicies egressPolicies
}

var (
	_ dptypes.Driver       = (*BPF)(nil)
	_ dptypes.PolicyDriver = (*BPF)(nil)
)

func newBPF(dp *datapath.Datapath, addrs *nodeAddrs, nat *snat.Manager, md IMDS, mtu int, sysctlRoot string, log *slog.Logger) *BPF {
	return &BPF{dp: dp, addrs: addrs, nat: nat, routes: &hostroute.Routes{}, imds: md, mtu: mtu, sysctlRoot: sysctlRoot, log: log, enis: map[string]int{},
		egressPolicies: egressPolicies{egress: map[netip.Addr]netip.Addr{}, policy: map[netip.Addr]dptypes.PodPolicy{}}}
}

// SetVPCCIDRs makes the VPC's blocks, a block associated later included, leave by the pod's ENI (the
// routes map) and escape the masquerade rule.
func (b *BPF) SetVPCCIDRs(ctx context.Context, cidrs []netip.Prefix) error {
	if err := b.dp.SetVPCCIDRs(cidrs); err != nil {
		return fmt.Errorf("setting the VPC's CIDR blocks: %w", err)
	}
	if err := b.nat.SetVPCCIDRs(ctx, cidrs); err != nil {
		return fmt.Errorf("setting the VPC's CIDR blocks: %w", err)
	}
	b.log.Info("VPC CIDR blocks set", "cidrs", cidrs)
	return nil
}

// ReadPolicyDenials calls fn with each new flow a pod's policy denied, as the programs report them
// (datapath.Datapath.ReadPolicyDenials), until ctx ends.
func (b *BPF) ReadPolicyDenials(ctx context.Context, fn func(datapath.PolicyDenial)) error {
	return b.dp.ReadPolicyDenials(ctx, fn)
}

// Close stops following the node's addresses and releases this process's handles only: programs, links
// and maps stay pinned for the next agent.
func (b *BPF) Close() error {
	b.addrs.close()
	return b.dp.Close()
}

// ENIUp brings the ENI's interface up (a secondary one at the VPC's MTU), loosens its reverse-path check,
// writes its map entry and attaches to_pod and to_vpc.
func (b *BPF) ENIUp(ctx context.Context, e dptypes.ENI) error {
	l, err := linkByMAC(e.MAC)
	if err != nil {
		return fmt.Errorf("bringing ENI %s up: %w", e.ID, err)
	}
	a := l.Attrs()
	// The primary ENI belongs to the distribution's network configuration: only secondaries are ours to
	// configure.
	if !e.Primary && b.mtu > 0 && a.MTU != b.mtu {
		if err := netlink.LinkSetMTU(l, b.mtu); err != nil {
			return fmt.Errorf("setting MTU %d on %s (ENI %s): %w", b.mtu, a.Name, e.ID, err)
		}
		b.log.Info("ENI MTU set", "eni", e.ID, "link", a.Name, "mtu", b.mtu)
	}
	if a.Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("setting %s (ENI %s) up: %w", a.Name, e.ID, err)
		}
		b.log.Info("ENI link up", "eni", e.ID, "link", a.Name)
	}
	if !e.Primary {
		if err := addPrimaryIP(ctx, b.imds, e, l, b.log); err != nil {
			return fmt.Errorf("bringing ENI %s up: %w", e.ID, err)
		}
		// The ENI's own address is the node's: a pod reaches it through the host, not out and back through
		// the VPC.
		if err := b.addrs.refresh(); err != nil {
			return fmt.Errorf("bringing ENI %s up: %w", e.ID, err)
		}
	}
	// Replies of flows the host stack translated (Service DNAT) arrive on the pod's ENI with a source the
	// main table routes elsewhere: a strict check would drop them.
	if err := setSysctl(b.log, b.sysctlRoot, "net/ipv4/conf/"+a.Name+"/rp_filter", "2"); err != nil {
		return fmt.Errorf("bringing ENI %s up: %w", e.ID, err)
	}
	entry, err := eniEntry(e, l)
	if err != nil {
		return fmt.Errorf("bringing ENI %s up: %w", e.ID, err)
	}
	if err := b.dp.PutENI(entry.Ifindex, entry.Gateway, entry.MAC, entry.Subnet); err != nil {
		return fmt.Errorf("bringing ENI %s up: %w", e.ID, err)
	}
	b.mu.Lock()
	b.enis[e.ID] = a.Index
	b.mu.Unlock()
	return nil
}

// ENIDown detaches the ENI's programs and removes its entry. The interface may be gone already (the ENI
// was detached): its entry is then found by MAC in the map.
func (b *BPF) ENIDown(_ context.Context, e dptypes.ENI) error {
	idx := 0
	if l, err := linkByMAC(e.MAC); err == nil {
		idx = l.Attrs().Index
	} else if !errors.Is(err, errNoLink) {
		return fmt.Errorf("taking ENI %s down: %w", e.ID, err)
	}
	b.mu.Lock()
	if idx == 0 {
		idx = b.enis[e.ID]
	}
	delete(b.enis, e.ID)
	b.mu.Unlock()
	if idx == 0 {
		entries, err := b.dp.ENIs()
		if err != nil {
			return fmt.Errorf("taking ENI %s down: %w", e.ID, err)
		}
		for _, m := range entries {
			if bytes.Equal(m.MAC, e.MAC) {
				idx = m.Ifindex
			}
		}
	}
	if idx == 0 {
		return nil
	}
	if err := b.dp.DeleteENI(idx); err != nil {
		return fmt.Errorf("taking ENI %s down: %w", e.ID, err)
	}
	return nil
}

// PodUp claims the pod's veth, writes its addresses' map entries (its ENI by ifindex, a dual-stack pod's IPv6
// with its /80's; an IPv6 pod's IPv4 egress address with none), routes the addresses to the veth and attaches from_pod. The order is the
// pod's isolation:
//   - the claim goes first (hostroute.Routes.Claim), so that a setup that fails later, say while the pod's
//     ENI has no interface, leaves the live pod's veth to the controller's next try, not to the sweep of
//     unclaimed veths;
//   - the entries go in before the route: from the route on, the host delivers the address's packets to the
//     veth, and eniw_forward judges them by the flags in the pod's entry; a packet the host routed there
//     before the entry (a flow conntrack kept from while the address was free) was judged as to no pod and
//     reached a pod its policy isolates. A setup that fails before the route leaves none;
//   - the entries go in before the program: from_pod drops sources it does not know.
func (b *BPF) PodUp(ctx context.Context, pod dptypes.Pod) error {
	if err := b.routes.Claim(pod); err != nil {
		return fmt.Errorf("setting up pod %s: %w", pod.IP, err)
	}
	entries, err := podEntries(pod)
	if err != nil {
		return fmt.Errorf("setting up pod %s: %w", pod.IP, err)
	}
	if err := b.followPod(ctx, pod); err != nil {
		return fmt.Errorf("setting up pod %s: %w", pod.IP, err)
	}
	for _, entry := range entries {
		if err := b.dp.PutPodEntry(entry); err != nil {
			return fmt.Errorf("setting up pod %s: %w", pod.IP, err)
		}
	}
	if err := b.routes.PodUp(ctx, pod); err != nil {
		return fmt.Errorf("setting up pod %s: %w", pod.IP, err)
	}
	if err := b.dp.AttachPodVeth(entries[0].HostIfindex); err != nil {
		return fmt.Errorf("setting up pod %s: %w", pod.IP, err)
	}
	return nil
}

// RemoveVethsInBackground makes the agent own the pods' host veths: PodDown then removes the pod's map entry
// and route at once and leaves the veth, with the from_pod link on it, to the returned Reaper, whose Run the
// caller starts. Call it before the controller is built: the controller asks RemovesHostVeth once.
func (b *BPF) RemoveVethsInBackground(log *slog.Logger) *hostroute.Reaper {
	b.routes.Veths = hostroute.NewReaper(hostroute.ReaperConfig{Logger: log, Removed: b.podVethGone})
	return b.routes.Veths
}

// podVethGone unpins the from_pod link of a removed veth; the kernel detached the program with the device.
func (b *BPF) podVethGone(ifindex int) {
	if err := b.dp.DetachPodVeth(ifindex); err != nil {
		b.log.Warn("unpinning the program link of a removed host veth", "ifindex", ifindex, "error", err)
	}
}

// RemovesHostVeth reports whether PodDown removes the pod's host veth.
func (b *BPF) RemovesHostVeth() bool { return b.routes.RemovesHostVeth() }

// PodDown reverses PodUp; a veth, entry or route already gone is not an error, a pod without an address is
// (nothing is torn down). The route and entry go now (the IP may serve another pod as soon as its cooldown
// ends), the route first: while the host still routes the address to the veth, the entry keeps what it
// delivers judged by the pod's policy. from_pod stays on the veth until the veth itself goes, which detaches
// it: with no entry for the veth, from_pod drops whatever the pod still sends, where a veth without it would
// pass everything on to the host unchecked. When the agent owns the host veth, the Reaper removes it in the
// background and unpins its link; otherwise whoever deletes the veth (the plugin's DEL) takes the program
// with it, and the link's pin goes at the next start or when the index comes back (datapath's attach).
func (b *BPF) PodDown(ctx context.Context, pod dptypes.Pod) error {
	if !pod.IP.IsValid() {
		return fmt.Errorf("tearing down pod %s: %w", pod.ContainerID, errNoPodIP)
	}
	b.forgetPod(pod)
	errs := []error{b.routes.PodDown(ctx, pod), b.dp.DeletePod(pod.IP)}
	if pod.IPv6.IsValid() {
		errs = append(errs, b.dp.DeletePod(pod.IPv6))
	}
	if pod.EgressIP.IsValid() {
		errs = append(errs, b.dp.DeletePod(pod.EgressIP))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tearing down pod %s: %w", pod.IP, err)
	}
	return nil
}
