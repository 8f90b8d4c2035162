package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// A node of an IPv6 cluster holds the IPv6 address EC2 lists on its primary ENI, inside the subnet's /64,
// and is reached at it across the VPC: the address kubelet registers and the API server dials.
func TestAnIPv6NodeIsReachedAtTheAddressEC2GaveIt(t *testing.T) {
	testenv.RequireRoot(t)
	f, _ := FamilyOf(IPv6)
	name := fmt.Sprintf("ekv6%02x", os.Getpid()&0xff) // never a cluster's ek%04x
	c := &Cluster{Name: name, Dir: filepath.Join(t.TempDir(), name), Family: f, logf: t.Logf}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.startVPC(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := c.newInstance(ctx, "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	ip, ok := netip.AddrFromSlice(n.IP())
	if !ok || !ip.Is6() || !netip.MustParsePrefix(f.SubnetBlock).Contains(ip) {
		t.Fatalf("the node's IP is %s, want an address of the subnet's %s", n.IP(), f.SubnetBlock)
	}
	for _, e := range c.Sim.Snapshot().ENIs {
		if e.ID == n.Instance.PrimaryENI && !slices.Equal(e.IPv6s, []string{ip.String()}) {
			t.Errorf("EC2 lists %v on the primary ENI, want [%s]", e.IPv6s, ip)
		}
	}

	l, err := vpcfabric.Listen(n.Netns.NetnsPath, "tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		peer, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
		fmt.Fprint(conn, peer)
	}()
	var conn net.Conn
	for {
		if conn, err = vpcfabric.DialContext(c.Fabric.VPCHost().NetnsPath)(ctx, "tcp", l.Addr().String()); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond) // until the fabric has routed the address EC2 just assigned
	}
	if err != nil {
		t.Fatalf("the VPC host reaching the node at %s: %v", l.Addr(), err)
	}
	defer conn.Close()
	seen, err := io.ReadAll(conn)
	if want := c.Fabric.VPCHost().IPv6.String(); err != nil || string(seen) != want {
		t.Errorf("the node saw the VPC host as %q (%v), want %s", seen, err, want)
	}
}
