package vpcfabric

import (
	"fmt"
	"net/netip"
)

// addOnPremises adds the on-premises host: a network outside the VPC's CIDRs that the router reaches and
// that reaches every address of the VPC, a pod's included, with no translation on the way (a VPN, Direct
// Connect, a peered VPC). Unlike the internet host it accepts packets from any source.
func (f *Fabric) addOnPremises() error {
	p, err := netip.ParsePrefix(f.opts.OnPremises)
	if err != nil || !p.Addr().Is4() {
		return fmt.Errorf("parsing on-premises host %q: %w", f.opts.OnPremises, ErrInvalidOptions)
	}
	f.onprem, f.onPremises, err = f.addHost("onprem", "onprem", p)
	return err
}

// OnPremises is the host outside the VPC's CIDRs that reaches pods by their own addresses.
func (f *Fabric) OnPremises() Host { return f.onPremises }
