package vpcfabric

import (
	"io"
	"net"
	"net/netip"
	"testing"
)

// TestOnPremisesReachesTheVPCAsItself: the on-premises host opens a connection to an address inside the VPC
// (the VPC host) and is seen there with its own address, outside the VPC's CIDRs: nothing translates it on
// the way, as over a VPN or a peering.
func TestOnPremisesReachesTheVPCAsItself(t *testing.T) {
	w := newWorld(t)
	on, vpc := w.fab.OnPremises(), w.fab.VPCHost()
	if netip.MustParsePrefix("10.0.0.0/16").Contains(on.IP) {
		t.Fatalf("the on-premises host %s lies inside the VPC", on.IP)
	}
	l, err := Listen(vpc.NetnsPath, "tcp", netip.AddrPortFrom(vpc.IP, 18000).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			seen <- err.Error()
			return
		}
		defer c.Close()
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		seen <- host
		_, _ = io.WriteString(c, host)
	}()
	c, err := DialContext(on.NetnsPath)(waitCtx(t), "tcp", netip.AddrPortFrom(vpc.IP, 18000).String())
	if err != nil {
		t.Fatalf("the on-premises host cannot reach the VPC host: %v", err)
	}
	defer c.Close()
	if got := <-seen; got != on.IP.String() {
		t.Errorf("the VPC host saw the on-premises host as %s, want %s", got, on.IP)
	}
	if b, err := io.ReadAll(c); err != nil || string(b) != on.IP.String() {
		t.Errorf("answer %q, %v; want %q", b, err, on.IP)
	}
}
