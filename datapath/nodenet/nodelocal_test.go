package nodenet

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/snat"
	"github.com/eniwire/eniwire/internal/testenv"
)

// externalSNAT is the SNAT settings' environment of a node whose pods' traffic something outside translates.
func externalSNAT(name string) string {
	if name == snat.EnvExternalSNAT {
		return "true"
	}
	return ""
}

// TestNodeAddressesGoToTheHostWithExternalSNAT: with external SNAT, every destination outside the routes map
// leaves by the pod's ENI, so the node's own addresses must all be host routes, and so must the link-local
// range: a pod's packet to an address on a dummy interface of the node (one added after the agent started,
// as NodeLocal DNSCache adds its own), or to the secondary ENI's own address, reaches the node without a
// trip through the VPC; and a pod's packet to IMDS crosses the node's FORWARD chain, where an operator's
// DROP rule applies.
func TestNodeAddressesGoToTheHostWithExternalSNAT(t *testing.T) {
	iptables := testenv.RequireTool(t, "iptables")
	imds := netip.MustParseAddrPort("169.254.169.254:7001")
	n := newTestNode(t, externalSNAT, imds.Addr())

	t.Run("an address on a dummy interface added later reaches the node", func(t *testing.T) {
		local := netip.MustParseAddrPort("172.20.0.10:7002")
		n.in(t, n.node, "adding a dummy interface", func() error {
			var l netlink.Link = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "nodelocal0"}}
			if err := netlink.LinkAdd(l); err != nil {
				// Where the dummy driver is missing, a veth holds the address as well: what matters is that it
				// is local.
				l = &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nodelocal0"}, PeerName: "nodelocal0p"}
				if err := netlink.LinkAdd(l); err != nil {
					return fmt.Errorf("adding an interface: %w", err)
				}
			}
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: local.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
				return err
			}
			return netlink.LinkSetUp(l)
		})
		n.waitRoute(t, local.Addr())
		n.reachesTheNodeDirectly(t, local)
	})
	t.Run("a global IPv6 address of the node goes to the host, its link-local one gets no entry of its own", func(t *testing.T) {
		global := netip.MustParseAddr("2600:1f14:e0:1::10")
		var linkLocal netip.Addr
		n.in(t, n.node, "adding an IPv6 address", func() error {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nodeip6"}, PeerName: "nodeip6p"}
			if err := netlink.LinkAdd(l); err != nil {
				return fmt.Errorf("adding an interface: %w", err)
			}
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: global.AsSlice(), Mask: net.CIDRMask(128, 128)},
				Flags: unix.IFA_F_NODAD}); err != nil {
				return err
			}
			linkLocal = netip.MustParseAddr("fe80::10")
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: linkLocal.AsSlice(), Mask: net.CIDRMask(64, 128)},
				Flags: unix.IFA_F_NODAD})
		})
		n.waitRoute(t, global)
		routes, err := n.b.dp.Routes()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Prefix == netip.PrefixFrom(linkLocal, 128) {
				t.Errorf("the routes map holds %v, the node's link-local address (fe80::/10 goes to the host as a whole)", r)
			}
		}
	})
	t.Run("the secondary ENI's own address reaches the node, not out through the VPC and back", func(t *testing.T) {
		n.reachesTheNodeDirectly(t, netip.AddrPortFrom(n.eniIP, 7003))
	})
	t.Run("a FORWARD DROP rule for IMDS blocks a pod's request", func(t *testing.T) {
		rule := []string{"FORWARD", "-d", imds.Addr().String(), "-j", "DROP"}
		n.in(t, n.node, "adding the DROP rule", func() error { return run(iptables, append([]string{"-w", "-I"}, rule...)...) })
		if src, ok := n.sourceSeen(t, n.vpc, imds, 2*time.Second); ok {
			t.Fatalf("IMDS got the pod's request (source %s) despite the node's FORWARD DROP rule", src)
		}
		n.in(t, n.node, "removing the DROP rule", func() error { return run(iptables, append([]string{"-w", "-D"}, rule...)...) })
		if src, ok := n.sourceSeen(t, n.vpc, imds, 3*time.Second); !ok || src != n.podIP {
			t.Fatalf("without the rule, IMDS got from the pod: %v (source %s), want the pod's %s", ok, src, n.podIP)
		}
	})
}

// reachesTheNodeDirectly asserts that the pod's datagrams to dst, an address of the node, reach the node
// with the pod's address and none leaves by the pod's ENI on the way. Only those datagrams are counted on
// the VPC's side: the ENI's link sends its own (IPv6 neighbour discovery and listener reports once it is up).
func (n *testNode) reachesTheNodeDirectly(t *testing.T, dst netip.AddrPort) {
	t.Helper()
	iptables := testenv.RequireTool(t, "iptables")
	tag := "eniwire-test-" + dst.String()
	rule := []string{"PREROUTING", "-i", "vpc1", "-p", "udp", "-d", dst.Addr().String(), "--dport",
		fmt.Sprint(dst.Port()), "-m", "comment", "--comment", tag}
	n.in(t, n.vpc, "counting the pod's datagrams on the ENI", func() error {
		return run(iptables, append([]string{"-w", "-t", "raw", "-I"}, rule...)...)
	})
	defer n.in(t, n.vpc, "removing the count", func() error {
		return run(iptables, append([]string{"-w", "-t", "raw", "-D"}, rule...)...)
	})
	src, ok := n.sourceSeen(t, n.node, dst, 3*time.Second)
	if !ok || src != n.podIP {
		t.Fatalf("the node's %s got from the pod: %v (source %s), want the pod's %s", dst, ok, src, n.podIP)
	}
	var out []byte
	n.in(t, n.vpc, "reading the count", func() (err error) {
		out, err = exec.Command(iptables+"-save", "-c", "-t", "raw").Output()
		return err
	})
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, tag) {
			continue
		}
		var pkts, bytes uint64
		if _, err := fmt.Sscanf(line, "[%d:%d]", &pkts, &bytes); err != nil {
			t.Fatalf("reading the count from %q: %v", line, err)
		}
		if pkts != 0 {
			t.Errorf("%d of the pod's datagrams to %s left by its ENI on the way, want none", pkts, dst)
		}
		return
	}
	t.Fatalf("no counting rule %s in the VPC's raw table:\n%s", tag, out)
}

// waitRoute waits until the routes map sends ip to the host.
func (n *testNode) waitRoute(t *testing.T, ip netip.Addr) {
	t.Helper()
	want := datapath.Route{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Kind: datapath.RouteHost}
	deadline := time.Now().Add(3 * time.Second)
	for {
		routes, err := n.b.dp.Routes()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(routes, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the routes map has no %v after 3s: %v", want, routes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}
