package subnet

import "net/netip"

// Gateway returns the first host address of cidr (the VPC router of that subnet), or "" if cidr is invalid.
func Gateway(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	return p.Masked().Addr().Next().String()
}
