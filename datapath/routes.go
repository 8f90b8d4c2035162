package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/bpf"
)

// What the routes map holds, and so where from_pod sends a pod's packet that is not for a pod of this node
// (and whether to_pod lets a source's packets take the fast path):
//   - the VPC's blocks and the EXCLUDE_SNAT CIDRs: RouteVPC, out of the pod's own ENI;
//   - the node's own addresses (every local address: secondary ENIs' primary IPs, dummy interfaces),
//     169.254.0.0/16 and Config.HostCIDRs: RouteHost, to the host stack, in both SNAT modes. The
//     link-local range is the node's (IMDS, NodeLocal DNSCache, the EKS Pod Identity agent): leaving by an
//     ENI it would skip the host's filters, or reach the VPC router and be lost. So are IPv6's link-local
//     (fe80::/10, the pod's gateway) and multicast (ff00::/8) ranges, which no router forwards off the link.
//
// An IPv4 destination in no entry goes to the host with SNAT (to be masqueraded) and out of the pod's ENI
// without; an IPv6 one always leaves by the pod's ENI (IPv6 is never translated). A prefix in both sets is
// a host route.

// hostOnly are the ranges that are the node's, never the VPC's: 169.254.0.0/16, fe80::/10 and ff00::/8.
var hostOnly = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// SetVPCCIDRs replaces the VPC's prefixes in the routes map (pods reach them by their own ENI) and keeps
// the EXCLUDE_SNAT and host ones: a block associated with the VPC later joins at run time.
func (d *Datapath) SetVPCCIDRs(vpc []netip.Prefix) error {
	d.routesMu.Lock()
	defer d.routesMu.Unlock()
	d.vpc = slices.Clone(vpc)
	return d.writeRoutes()
}

// SetNodeIPs replaces the node's own addresses in the routes map: an address added to the node later (a
// secondary ENI's primary IP, a dummy interface's) goes to the host from then on.
func (d *Datapath) SetNodeIPs(ips []netip.Addr) error {
	d.routesMu.Lock()
	defer d.routesMu.Unlock()
	d.nodeIPs = slices.Clone(ips)
	return d.writeRoutes()
}

// writeRoutes makes the routes map hold the current sets. The caller holds routesMu.
func (d *Datapath) writeRoutes() error {
	vpc := append(slices.Clone(d.vpc), d.cfg.ExcludeSNATCIDRs...)
	host := append(slices.Clone(d.cfg.HostCIDRs), hostOnly...)
	for _, a := range d.nodeIPs {
		a = a.Unmap().WithZone("")
		if slices.ContainsFunc(host, func(p netip.Prefix) bool { return p.Contains(a) }) {
			continue // one entry of a range that holds it already is enough
		}
		host = append(host, netip.PrefixFrom(a, a.BitLen()))
	}
	return d.setRoutes(vpc, host)
}

// setRoutes makes the routes map hold exactly these prefixes: vpc ones leave by the pod's ENI, host ones
// go to the host stack. A prefix in both is a host route.
func (d *Datapath) setRoutes(vpc, host []netip.Prefix) error {
	want := map[bpf.EniwireRouteKey]RouteKind{}
	for _, set := range []struct {
		prefixes []netip.Prefix
		kind     RouteKind
	}{{vpc, RouteVPC}, {host, RouteHost}} {
		for _, p := range set.prefixes {
			k, err := routeKey(p)
			if err != nil {
				return fmt.Errorf("setting route %s: %w", p, err)
			}
			want[k] = set.kind
		}
	}
	var (
		k     bpf.EniwireRouteKey
		v     bpf.EniwireRouteValue
		stale []bpf.EniwireRouteKey
	)
	it := d.objs.Routes.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterating routes: %w", err)
	}
	for k, kind := range want {
		if err := d.objs.Routes.Put(k, bpf.EniwireRouteValue{Kind: bpf.EniwireRouteKind(kind)}); err != nil {
			return fmt.Errorf("setting route %s: %w", prefixFromRouteKey(k), err)
		}
	}
	for _, k := range stale {
		if err := d.objs.Routes.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting route %s: %w", prefixFromRouteKey(k), err)
		}
	}
	return nil
}
