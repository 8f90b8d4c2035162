package metadata

import (
	"context"
	"net/netip"
	"strings"
)

// IMDS reads the ENIs IMDS shows: their MACs for the reconciler's comparison and the ENIs themselves for a new
// instance's first view (eni.IMDS), and an ENI's primary IP for the datapath that puts it on the ENI's link
// (nodenet.IMDS).
type IMDS struct{ API IMDSAPI }

// ENIs returns the ENIs IMDS lists (see the package function ENIs).
func (m IMDS) ENIs(ctx context.Context) ([]IMDSENI, error) { return ENIs(ctx, m.API) }

// ENIMACs returns the MACs of the ENIs IMDS lists.
func (m IMDS) ENIMACs(ctx context.Context) ([]string, error) {
	enis, err := ENIs(ctx, m.API)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(enis))
	for _, e := range enis {
		out = append(out, e.MAC)
	}
	return out, nil
}

// PrimaryIP returns the first address IMDS lists for the ENI with mac (its primary IP), or the zero Addr when
// IMDS does not list the ENI or no address of it yet.
func (m IMDS) PrimaryIP(ctx context.Context, mac string) (netip.Addr, error) {
	enis, err := ENIs(ctx, m.API)
	if err != nil {
		return netip.Addr{}, err
	}
	var ip netip.Addr
	for _, e := range enis {
		if strings.EqualFold(e.MAC, mac) && len(e.IPs) > 0 {
			ip = e.IPs[0]
		}
	}
	return ip, nil
}
