// Package hostroute routes each pod's address (a /32; in IPv6 mode a /128 and its IPv4 egress /32) to its
// host veth in the main table (a route, not a rule), so the host stack reaches the pod, and removes released pods' host veths in the background (Reaper). Routes alone
// is the agent's `hostroute` datapath; datapath/nodenet's BPF driver uses it for the routes beside its maps.
package hostroute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Routes implements dptypes.Driver with host routes only.
type Routes struct {
	// Handle is the netlink handle to use (nil: the current network namespace).
	Handle *netlink.Handle
	// Veths, if set, makes the agent own the pods' host veths: PodUp claims the veth, PodDown hands it to
	// Veths for removal in the background. Nil leaves the veths to the CNI plugin.
	Veths *Reaper
}

var _ dptypes.Driver = (*Routes)(nil)

func (r *Routes) h() *netlink.Handle {
	if r.Handle != nil {
		return r.Handle
	}
	return &netlink.Handle{}
}

// podDsts are the pod's host routes' destinations: its address (/32 or /128), a dual-stack pod's IPv6 address
// (/128) and an IPv6 pod's IPv4 egress address (/32), or an error when the pod has no address.
func podDsts(pod dptypes.Pod) ([]*net.IPNet, error) {
	if !pod.IP.IsValid() {
		return nil, fmt.Errorf("pod %s has no address", pod.ContainerID)
	}
	dsts := []*net.IPNet{hostNet(pod.IP)}
	if pod.IPv6.Is6() {
		dsts = append(dsts, hostNet(pod.IPv6))
	}
	if pod.EgressIP.Is4() {
		dsts = append(dsts, hostNet(pod.EgressIP))
	}
	return dsts, nil
}

// hostNet is ip alone: a /32, or a /128.
func hostNet(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}
}

// routes are the pod's host routes through its veth.
func (r *Routes) routes(pod dptypes.Pod) ([]*netlink.Route, error) {
	dsts, err := podDsts(pod)
	if err != nil {
		return nil, fmt.Errorf("routing pod: %w", err)
	}
	idx := pod.HostIfindex
	if pod.HostVeth != "" {
		link, err := netlinkdump.LinkByName(r.Handle, pod.HostVeth)
		if isLinkNotFound(err) {
			return nil, fmt.Errorf("finding host veth %s: %w (%w)", pod.HostVeth, err, dptypes.ErrHostVethGone)
		}
		if err != nil {
			return nil, fmt.Errorf("finding host veth %s: %w", pod.HostVeth, err)
		}
		idx = link.Attrs().Index
	}
	if idx == 0 {
		return nil, fmt.Errorf("routing pod %s: no host veth", pod.IP)
	}
	rts := make([]*netlink.Route, 0, len(dsts))
	for _, dst := range dsts {
		rts = append(rts, &netlink.Route{LinkIndex: idx, Dst: dst, Scope: netlink.SCOPE_LINK})
	}
	return rts, nil
}

// RemovesHostVeth reports whether PodDown removes the pod's host veth (Veths is set).
func (r *Routes) RemovesHostVeth() bool { return r.Veths != nil }

// PodUp claims the pod's host veth (Claim), then adds (or replaces) podIP/32 (or /128) dev <hostVeth>, and an
// IPv6 pod's egressIP/32 beside it. It fails wrapping ErrVethRemoving when the veth is already being removed.
func (r *Routes) PodUp(_ context.Context, pod dptypes.Pod) error {
	rts, err := r.claim(pod)
	if err != nil {
		return err
	}
	for _, rt := range rts {
		if err := r.h().RouteReplace(rt); err != nil {
			return fmt.Errorf("adding route %s dev index %d: %w", rt.Dst, rt.LinkIndex, err)
		}
	}
	return nil
}

// Claim makes the pod's host veth the agent's when Veths is set, without routing to it: the sweep of
// unclaimed veths leaves it from then on, even when the rest of the pod's setup fails and waits for the
// controller's next try. It fails wrapping ErrVethRemoving when the veth is already being removed.
func (r *Routes) Claim(pod dptypes.Pod) error {
	_, err := r.claim(pod)
	return err
}

// claim claims the pod's veth and returns its routes.
func (r *Routes) claim(pod dptypes.Pod) ([]*netlink.Route, error) {
	rts, err := r.routes(pod)
	if err != nil {
		return nil, err
	}
	if r.Veths != nil {
		if err := r.Veths.Keep(Veth{Name: pod.HostVeth, Index: rts[0].LinkIndex}); err != nil {
			return nil, fmt.Errorf("routing pod %s: %w", pod.IP, err)
		}
	}
	return rts, nil
}

// PodDown removes the pod's host routes and, when Veths is set, queues the veth the assignment recorded for
// removal; a missing route or veth is not an error, a pod without an address is.
func (r *Routes) PodDown(_ context.Context, pod dptypes.Pod) error {
	if r.Veths != nil {
		// After the route: the route goes now, so the IP can serve another pod whenever the veth goes.
		defer r.Veths.Release(Veth{Name: pod.HostVeth, Index: pod.HostIfindex})
	}
	dsts, err := podDsts(pod)
	if err != nil {
		return fmt.Errorf("removing the route of pod %s: %w", pod.ContainerID, err)
	}
	full, _ := r.routes(pod)
	for i, dst := range dsts {
		rt := &netlink.Route{Dst: dst, Scope: netlink.SCOPE_LINK}
		if i < len(full) {
			rt = full[i]
		}
		if err := r.h().RouteDel(rt); err != nil && !errors.Is(err, syscall.ESRCH) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("removing route %s: %w", rt.Dst, err)
		}
	}
	return nil
}

// ENIUp does nothing: host routes need no per-ENI state.
func (r *Routes) ENIUp(context.Context, dptypes.ENI) error { return nil }

// ENIDown does nothing.
func (r *Routes) ENIDown(context.Context, dptypes.ENI) error { return nil }

// SetVPCCIDRs does nothing: with host routes only, every pod packet takes the host's routing.
func (r *Routes) SetVPCCIDRs(context.Context, []netip.Prefix) error { return nil }
