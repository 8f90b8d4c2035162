package subnet

import "net/netip"

// Gateway returns the first host address of cidr (the VPC router of that subnet), or "" if cidr is invalid.
func Gateway(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	return GatewayOf(p).String()
}

// GatewayOf returns the first host address of the subnet p: the VPC router of that subnet.
func GatewayOf(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }
