package snat

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/internal/linktest"
	"github.com/eniwire/eniwire/internal/testenv"
)

func TestFromEnvReadsTheAWSVariables(t *testing.T) {
	vpc := netip.MustParsePrefix("10.0.0.0/16")
	base := Config{PrimaryIP: netip.MustParseAddr("10.0.0.10"), PrimaryInterface: "eth0", ExcludeCIDRs: []netip.Prefix{vpc}}
	for _, c := range []struct {
		name     string
		env      map[string]string
		external bool
		excluded []string
		random   Randomize
		wantErr  bool
	}{
		{name: "nothing set means SNAT with the VPC excluded and fully random ports", excluded: []string{"10.0.0.0/16"}},
		{name: "external SNAT turns the rule off", env: map[string]string{EnvExternalSNAT: "true"}, external: true, excluded: []string{"10.0.0.0/16"}},
		{name: "excluded CIDRs add to the VPC's", env: map[string]string{EnvExcludeSNATCIDRs: "192.168.0.0/16, 172.16.5.1/24"}, excluded: []string{"10.0.0.0/16", "192.168.0.0/16", "172.16.5.0/24"}},
		{name: "hashrandom picks random", env: map[string]string{EnvRandomizeSNAT: "hashrandom"}, excluded: []string{"10.0.0.0/16"}, random: RandomizeHash},
		{name: "none picks sequential ports", env: map[string]string{EnvRandomizeSNAT: "none"}, excluded: []string{"10.0.0.0/16"}, random: RandomizeNone},
		{name: "a malformed CIDR is an error", env: map[string]string{EnvExcludeSNATCIDRs: "10.1.0.0/33"}, wantErr: true},
		{name: "an IPv6 CIDR is an error", env: map[string]string{EnvExcludeSNATCIDRs: "fd00::/8"}, wantErr: true},
		{name: "a malformed boolean is an error", env: map[string]string{EnvExternalSNAT: "maybe"}, wantErr: true},
		{name: "an unknown randomization is an error", env: map[string]string{EnvRandomizeSNAT: "dice"}, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := FromEnv(func(k string) string { return c.env[k] }, base)
			if c.wantErr {
				if err == nil {
					t.Fatalf("FromEnv accepted %v", c.env)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range cfg.ExcludeCIDRs {
				got = append(got, p.String())
			}
			if cfg.External != c.external || strings.Join(got, ",") != strings.Join(c.excluded, ",") || cfg.Randomize != c.random {
				t.Errorf("config = external %v, excluded %v, randomize %v; want %v, %v, %v", cfg.External, got, cfg.Randomize, c.external, c.excluded, c.random)
			}
		})
	}
	if len(base.ExcludeCIDRs) != 1 {
		t.Errorf("FromEnv changed its base config")
	}
}

// node is a node namespace whose primary interface prim (10.99.0.10) faces an "internet" namespace
// (10.99.0.1, and 198.51.100.7 on its loopback) that has no route back to pods, and a pod namespace
// (10.99.5.5) plugged into the node by a veth. Only SNAT lets the pod's packets be answered.
type node struct {
	node, pod, inet ns.NetNS
}

var (
	primaryIP = netip.MustParseAddr("10.99.0.10")
	podIP     = netip.MustParseAddr("10.99.5.5")
	inetHost  = netip.MustParseAddrPort("198.51.100.7:7000")
)

func newNode(t *testing.T) *node {
	t.Helper()
	testenv.RequireRoot(t)
	n := &node{}
	for _, p := range []*ns.NetNS{&n.node, &n.pod, &n.inet} {
		x, err := testutils.NewNS()
		if err != nil {
			t.Fatalf("creating netns: %v", err)
		}
		t.Cleanup(func() { _ = x.Close(); _ = testutils.UnmountNS(x) })
		*p = x
	}
	do := func(x ns.NetNS, what string, fn func() error) {
		t.Helper()
		if err := x.Do(func(ns.NetNS) error { return fn() }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do(n.node, "building node", func() error {
		for _, v := range []struct {
			name, peer string
			peerNS     ns.NetNS
		}{{"prim", "wan", n.inet}, {"hostveth", "eth0", n.pod}} {
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v.name}, PeerName: v.peer, PeerNamespace: netlink.NsFd(int(v.peerNS.Fd()))}); err != nil {
				return err
			}
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		prim, err := linktest.Up("prim", "10.99.0.10/24")
		if err != nil {
			return err
		}
		hv, err := linktest.Up("hostveth", "")
		if err != nil {
			return err
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: hv.Attrs().Index, Dst: host(podIP), Scope: netlink.SCOPE_LINK}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: prim.Attrs().Index, Gw: net.ParseIP("10.99.0.1")})
	})
	do(n.pod, "building pod", func() error {
		l, err := linktest.Up("eth0", podIP.String()+"/32")
		if err != nil {
			return err
		}
		if _, err := linktest.Up("lo", ""); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}})
	})
	do(n.inet, "building internet", func() error {
		if _, err := linktest.Up("wan", "10.99.0.1/24"); err != nil {
			return err
		}
		_, err := linktest.Up("lo", inetHost.Addr().String()+"/32")
		return err
	})
	// The pod's default route is on-link, so the node must answer ARP for everything on the veth.
	do(n.node, "enabling proxy ARP", func() error {
		return os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf/hostveth/proxy_arp"), []byte("1"), 0o644)
	})
	return n
}

func host(a netip.Addr) *net.IPNet { return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)} }

// seenSource sends one datagram from the pod to the internet host and returns the source the internet
// host saw, and whether the pod got the answer.
func (n *node) seenSource(t *testing.T) (netip.Addr, bool) {
	t.Helper()
	var srv net.PacketConn
	if err := n.inet.Do(func(ns.NetNS) (err error) {
		srv, err = net.ListenPacket("udp4", inetHost.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	seen := make(chan netip.Addr, 16)
	go func() {
		buf := make([]byte, 512)
		for {
			nr, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			seen <- from.(*net.UDPAddr).AddrPort().Addr().Unmap()
			_, _ = srv.WriteTo(buf[:nr], from)
		}
	}()
	var c *net.UDPConn
	if err := n.pod.Do(func(ns.NetNS) (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(inetHost))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var src netip.Addr
	buf := make([]byte, 512)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		_, _ = c.Write([]byte("hello"))
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(buf)
		select {
		case src = <-seen:
		default:
		}
		if err == nil {
			return src, true
		}
		if src.IsValid() && src == podIP {
			return src, false // reached the host untranslated; no answer can come back
		}
	}
	return src, false
}

func TestSNATTranslatesPodTrafficLeavingTheVPC(t *testing.T) {
	for _, backend := range []Backend{BackendNFTables, BackendIPTables} {
		t.Run("with "+backend.String(), func(t *testing.T) {
			for _, tool := range map[Backend][]string{BackendNFTables: {"nft"}, BackendIPTables: {"iptables", "iptables-restore"}}[backend] {
				testenv.RequireTool(t, tool)
			}
			n := newNode(t)
			ctx := context.Background()
			cfg := Config{
				PrimaryIP:        primaryIP,
				PrimaryInterface: "prim",
				ExcludeCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")},
				Backend:          backend,
				Logger:           slog.New(slog.NewTextHandler(t.Output(), nil)),
			}
			apply := func(t *testing.T, cfg Config) *Manager {
				t.Helper()
				m, err := New(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := n.node.Do(func(ns.NetNS) error { return m.Apply(ctx) }); err != nil {
					t.Fatal(err)
				}
				return m
			}
			// Someone else's nat rules must survive everything we do.
			foreign := map[Backend]string{
				BackendNFTables: "table ip someoneelse {\n\tchain post {\n\t\ttype nat hook postrouting priority srcnat + 10; policy accept;\n\t}\n}\n",
				BackendIPTables: "*nat\n:SOMEONE-ELSE - [0:0]\nCOMMIT\n",
			}[backend]
			if err := n.node.Do(func(ns.NetNS) error {
				tool := map[Backend][]string{BackendNFTables: {"nft", "-f", "-"}, BackendIPTables: {"iptables-restore", "--noflush"}}[backend]
				_, err := run(ctx, foreign, tool[0], tool[1:]...)
				return err
			}); err != nil {
				t.Fatal(err)
			}

			t.Run("without the rule the internet cannot answer", func(t *testing.T) {
				if src, ok := n.seenSource(t); ok {
					t.Fatalf("got an answer without SNAT (source seen %s)", src)
				}
			})
			t.Run("with the rule the internet sees the primary IP and answers", func(t *testing.T) {
				apply(t, cfg)
				apply(t, cfg) // idempotent
				if src, ok := n.seenSource(t); !ok || src != primaryIP {
					t.Fatalf("answer %v, source seen %s; want an answer from %s", ok, src, primaryIP)
				}
				if got := strings.Count(dumpRules(t, n, backend), "eniwire: pods leaving the VPC"); got != 1 {
					t.Errorf("%d SNAT rules after applying twice, want 1", got)
				}
			})
			t.Run("an excluded CIDR is not translated", func(t *testing.T) {
				ex := cfg
				ex.ExcludeCIDRs = append(ex.ExcludeCIDRs, netip.MustParsePrefix("198.51.100.0/24"))
				apply(t, ex)
				if src, ok := n.seenSource(t); ok || src != podIP {
					t.Fatalf("answer %v, source seen %s; want the pod's own %s and no answer", ok, src, podIP)
				}
			})
			t.Run("a block SetVPCCIDRs adds at run time is not translated", func(t *testing.T) {
				m := apply(t, cfg)
				if err := n.node.Do(func(ns.NetNS) error {
					return m.SetVPCCIDRs(ctx, []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16"), netip.MustParsePrefix("198.51.100.0/24")})
				}); err != nil {
					t.Fatal(err)
				}
				if src, ok := n.seenSource(t); ok || src != podIP {
					t.Fatalf("answer %v, source seen %s; want the pod's own %s and no answer", ok, src, podIP)
				}
				if err := n.node.Do(func(ns.NetNS) error { return m.SetVPCCIDRs(ctx, nil) }); err != nil {
					t.Fatal(err)
				}
				if src, ok := n.seenSource(t); !ok || src != primaryIP {
					t.Fatalf("answer %v, source seen %s after the block went; want an answer from %s", ok, src, primaryIP)
				}
			})
			t.Run("the egress range of IPv6 mode is translated towards an excluded CIDR and with external SNAT", func(t *testing.T) {
				eg := cfg
				eg.EgressCIDR = netip.PrefixFrom(podIP, 22).Masked() // the pod's address plays an egress address
				eg.ExcludeCIDRs = append(eg.ExcludeCIDRs, netip.MustParsePrefix("198.51.100.0/24"))
				for _, external := range []bool{false, true} {
					eg.External = external
					apply(t, eg)
					if src, ok := n.seenSource(t); !ok || src != primaryIP {
						t.Fatalf("external %v: answer %v, source seen %s; want an answer from %s", external, ok, src, primaryIP)
					}
					rules := dumpRules(t, n, backend)
					if got := strings.Count(rules, egressComment); got != 1 {
						t.Errorf("external %v: %d egress rules, want 1:\n%s", external, got, rules)
					}
					if got := strings.Count(rules, "eniwire: pods leaving the VPC"); got != map[bool]int{false: 1, true: 0}[external] {
						t.Errorf("external %v: %d pods' rules:\n%s", external, got, rules)
					}
				}
			})
			t.Run("external SNAT removes the rule and nothing else", func(t *testing.T) {
				ext := cfg
				ext.External = true
				apply(t, ext)
				rules := dumpRules(t, n, backend)
				if strings.Contains(rules, "eniwire") || strings.Contains(rules, iptChain) {
					t.Errorf("our rules remain after removal:\n%s", rules)
				}
				if !strings.Contains(strings.ToLower(rules), "someone") {
					t.Errorf("someone else's rules were removed:\n%s", rules)
				}
			})
		})
	}
}

func dumpRules(t *testing.T, n *node, b Backend) string {
	t.Helper()
	var out string
	if err := n.node.Do(func(ns.NetNS) (err error) {
		if b == BackendNFTables {
			out, err = run(context.Background(), "", "nft", "list", "ruleset")
		} else {
			out, err = run(context.Background(), "", "iptables-save", "-t", "nat")
		}
		return err
	}); err != nil {
		t.Fatal(fmt.Errorf("dumping rules: %w", err))
	}
	return out
}
