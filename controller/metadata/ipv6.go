package metadata

import (
	"context"
	"fmt"
	"net/netip"
)

// readIPv6 reads the IPv6 keys of the ENI whose IMDS directory is base ("network/interfaces/macs/MAC/").
// Every key may be absent: an ENI on an IPv4-only subnet has none of them.
func readIPv6(ctx context.Context, md IMDSAPI, base string) (IPv6Facts, error) {
	var f IPv6Facts
	var err error
	if f.Prefixes, err = readPrefixes(ctx, md, base+"ipv6-prefix"); err != nil {
		return f, err
	}
	if f.SubnetCIDRs, err = readPrefixes(ctx, md, base+"subnet-ipv6-cidr-blocks"); err != nil {
		return f, err
	}
	if f.VPCCIDRs, err = readPrefixes(ctx, md, base+"vpc-ipv6-cidr-blocks"); err != nil {
		return f, err
	}
	addrs, err := getList(ctx, md, base+"ipv6s")
	if err != nil {
		return f, err
	}
	for _, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() {
			return f, fmt.Errorf("parsing %sipv6s: %q is not an IPv6 address", base, s)
		}
		f.Addrs = append(f.Addrs, a)
	}
	return f, nil
}

// readPrefixes reads a newline-separated list of IPv6 prefixes; absent is none.
func readPrefixes(ctx context.Context, md IMDSAPI, path string) ([]netip.Prefix, error) {
	list, err := getList(ctx, md, path)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is6() {
			return nil, fmt.Errorf("parsing %s: %q is not an IPv6 prefix", path, s)
		}
		out = append(out, p)
	}
	return out, nil
}
