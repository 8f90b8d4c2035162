package datapath

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/snat"
	"github.com/eniwire/eniwire/internal/testenv"
)

// Clients outside the VPC's CIDRs open connections to a pod by its IP (on-premises over a VPN, a peered
// VPC, an NLB that keeps the client's address), on a node that masquerades pod traffic leaving the VPC as
// the agent sets it up and drops INVALID packets as kube-proxy's iptables mode does. Both live on the vpc
// namespace's loopback, routed to by the VPC router like the VPC host (fabric_test.go).
var (
	onPremClient   = addr("192.168.50.7") // outside every VPC route
	excludedClient = addr("172.16.3.4")   // in AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS
	excludedCIDR   = prefix("172.16.0.0/16")
)

func TestClientOutsideVPCWithIptablesKubeProxy(t *testing.T) {
	t.Parallel()
	testClientOutsideVPC(t, iptablesRules, snat.BackendIPTables)
}

func TestClientOutsideVPCWithNftablesKubeProxy(t *testing.T) {
	t.Parallel()
	testClientOutsideVPC(t, nftablesRules, snat.BackendNFTables)
}

func testClientOutsideVPC(t *testing.T, kubeProxy func(t *testing.T, f *fabric), backend snat.Backend) {
	testenv.RequireTool(t, "iptables")
	f := newFabric(t)
	root := testPinRoot(t)
	cfg := f.config(root, AttachAuto)
	cfg.ExcludeSNATCIDRs = []netip.Prefix{excludedCIDR}
	d := f.open(t, cfg)
	t.Cleanup(func() {
		_ = d.Close()
		_ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) })
	})
	f.wire(t, d)
	kubeProxy(t, f)
	f.nodeDo(t, "installing the SNAT rule and the default route, as on a node", func() error {
		if err := netlink.RouteAdd(&netlink.Route{Gw: gw1.AsSlice(), LinkIndex: f.eni1}); err != nil {
			return fmt.Errorf("adding the default route: %w", err)
		}
		nat, err := snat.New(context.Background(), snat.Config{
			PrimaryIP: addr("10.77.1.10"), PrimaryInterface: "eni1", VPCCIDRs: cfg.VPCCIDRs,
			ExcludeCIDRs: cfg.ExcludeSNATCIDRs, Backend: backend, Logger: testLogger(t),
		})
		if err != nil {
			return err
		}
		return nat.Apply(context.Background())
	})
	if err := f.vpc.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for _, a := range []netip.Addr{onPremClient, excludedClient} {
			if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: hostNet(a)}); err != nil {
				return fmt.Errorf("adding client %s: %w", a, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	serveTCPEcho(t, f.pod2, kpPod2TCP)
	serveUDPEcho(t, f.pod2, kpPod2UDP)

	for _, c := range []struct {
		what    string
		client  netip.Addr
		request Verdict // what to_pod counts the client's packets under
	}{
		{"a client outside the VPC", onPremClient, VerdictToPodOutsideVPC},
		{"a client in an EXCLUDE_SNAT CIDR", excludedClient, VerdictToPodToPeer},
	} {
		t.Run(c.what+" reaches a pod over TCP", func(t *testing.T) {
			before := counterNow(t, d.Reader, c.request)
			for i := range 3 {
				if err := tcpExchangeFrom(f.vpc, c.client, kpPod2TCP, 5*time.Second); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
			}
			// SYN, ACK, data and FIN of each connection at least.
			waitCounter(t, d.Reader, c.request, before+3*3)
		})
		t.Run(c.what+" reaches a pod over UDP", func(t *testing.T) {
			before := counterNow(t, d.Reader, c.request)
			if err := udpExchange(f.vpc, c.client, kpPod2UDP, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			waitCounter(t, d.Reader, c.request, before+1)
		})
	}
}

// tcpExchangeFrom is tcpExchange from the local address src.
func tcpExchangeFrom(n ns.NetNS, src netip.Addr, dst netip.AddrPort, within time.Duration) error {
	var c net.Conn
	if err := n.Do(func(ns.NetNS) (err error) {
		d := net.Dialer{Timeout: within, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		c, err = d.Dial("tcp4", dst.String())
		return err
	}); err != nil {
		return fmt.Errorf("connecting to %s from %s: %w", dst, src, err)
	}
	defer c.Close()
	return echoOn(c, dst, within)
}
