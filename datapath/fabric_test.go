package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/datapath/internal/linktest"
)

// fabric is a node in network namespaces: two pods with veths into the node, and two ENIs (veths) toward a
// vpc namespace that routes like the VPC's subnet routers, with strict reverse-path filtering playing
// EC2's source/destination check. The node has no route to the VPC host 10.77.9.9 except what the test
// adds, so only the BPF programs can get pod packets there.
//
//	pod1 10.77.1.21 -- host1 [node] eni1 10.77.1.10 -- vpc1 10.77.1.1 [vpc, lo 10.77.9.9]
//	pod2 10.77.2.22 -- host2 [node] eni2 10.77.2.10 -- vpc2 10.77.2.1
type fabric struct {
	node, pod1, pod2, vpc ns.NetNS
	host1, host2          int // host veth ifindexes in node
	eni1, eni2            int
	eni1MAC, eni2MAC      net.HardwareAddr
}

var (
	pod1IP   = addr("10.77.1.21")
	pod2IP   = addr("10.77.2.22")
	vpcHost  = addr("10.77.9.9")
	spoofIP  = addr("10.77.1.99")
	svcIP    = addr("10.96.0.10")
	gw1, gw2 = addr("10.77.1.1"), addr("10.77.2.1")
)

func newFabric(t *testing.T) *fabric {
	t.Helper()
	f := &fabric{}
	for _, p := range []*ns.NetNS{&f.node, &f.pod1, &f.pod2, &f.vpc} {
		n, err := testutils.NewNS()
		if err != nil {
			t.Fatalf("creating netns: %v", err)
		}
		t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
		*p = n
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("building node", f.node.Do(func(ns.NetNS) error {
		for _, v := range []struct {
			name, peer string
			peerNS     ns.NetNS
		}{{"host1", "eth0", f.pod1}, {"host2", "eth0", f.pod2}, {"eni1", "vpc1", f.vpc}, {"eni2", "vpc2", f.vpc}} {
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v.name}, PeerName: v.peer, PeerNamespace: netlink.NsFd(int(v.peerNS.Fd()))}
			if err := netlink.LinkAdd(veth); err != nil {
				return fmt.Errorf("adding veth %s: %w", v.name, err)
			}
		}
		if err := sysctls(map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/rp_filter": "2"}); err != nil {
			return err
		}
		for name, cidr := range map[string]string{"eni1": "10.77.1.10/24", "eni2": "10.77.2.10/24", "host1": "", "host2": "", "lo": ""} {
			l, err := linktest.Up(name, cidr)
			if err != nil {
				return err
			}
			switch name {
			case "host1":
				f.host1 = l.Attrs().Index
			case "host2":
				f.host2 = l.Attrs().Index
			case "eni1":
				f.eni1, f.eni1MAC = l.Attrs().Index, l.Attrs().HardwareAddr
			case "eni2":
				f.eni2, f.eni2MAC = l.Attrs().Index, l.Attrs().HardwareAddr
			}
		}
		// The host stack's way to the pods, as the agent writes it (docs/design.md, "The flow of one node", step 3).
		for ip, dev := range map[netip.Addr]int{pod1IP: f.host1, pod2IP: f.host2} {
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: dev, Dst: hostNet(ip), Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("adding route to %s: %w", ip, err)
			}
		}
		return nil
	}))
	var hostMACs [2]net.HardwareAddr
	must("reading host MACs", f.node.Do(func(ns.NetNS) error {
		for i, name := range []string{"host1", "host2"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			hostMACs[i] = l.Attrs().HardwareAddr
		}
		return nil
	}))
	for i, p := range []struct {
		n  ns.NetNS
		ip netip.Addr
	}{{f.pod1, pod1IP}, {f.pod2, pod2IP}} {
		must("building pod", p.n.Do(func(ns.NetNS) error { return plumbPod(p.ip, hostMACs[i]) }))
	}
	must("building vpc", f.vpc.Do(func(ns.NetNS) error {
		if err := sysctls(map[string]string{"net/ipv4/conf/all/rp_filter": "1", "net/ipv4/conf/default/rp_filter": "1"}); err != nil {
			return err
		}
		for name, cidr := range map[string]string{"vpc1": "10.77.1.1/24", "vpc2": "10.77.2.1/24", "lo": "10.77.9.9/32"} {
			if _, err := linktest.Up(name, cidr); err != nil {
				return err
			}
			if err := sysctls(map[string]string{"net/ipv4/conf/" + name + "/rp_filter": "1"}); err != nil {
				return err
			}
		}
		// Each pod IP is reachable through its own ENI only, as a secondary IP of that ENI.
		for ip, via := range map[netip.Addr]string{pod1IP: "10.77.1.10", pod2IP: "10.77.2.10"} {
			if err := netlink.RouteAdd(&netlink.Route{Dst: hostNet(ip), Gw: net.ParseIP(via)}); err != nil {
				return fmt.Errorf("adding vpc route to %s: %w", ip, err)
			}
		}
		return nil
	}))
	return f
}

func plumbPod(ip netip.Addr, hostMAC net.HardwareAddr) error {
	l, err := linktest.Up("eth0", ip.String()+"/32")
	if err != nil {
		return err
	}
	if _, err := linktest.Up("lo", ""); err != nil {
		return err
	}
	gw := net.IPv4(169, 254, 1, 1)
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("adding gateway route: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("adding default route: %w", err)
	}
	return netlink.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: gw, HardwareAddr: hostMAC, State: netlink.NUD_PERMANENT, Family: netlink.FAMILY_V4})
}

func sysctls(kv map[string]string) error {
	for k, v := range kv {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("setting %s: %w", k, err)
		}
	}
	return nil
}

func hostNet(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}
}

// nodeDo runs fn in the node namespace, failing the test on error.
func (f *fabric) nodeDo(t *testing.T, what string, fn func() error) {
	t.Helper()
	if err := f.node.Do(func(ns.NetNS) error { return fn() }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wire writes the node's state into the datapath as the agent would and attaches every program.
func (f *fabric) wire(t *testing.T, d *Datapath) {
	t.Helper()
	f.nodeDo(t, "wiring the datapath", func() error {
		for _, e := range []struct {
			ifindex int
			gw      netip.Addr
			mac     net.HardwareAddr
			subnet  string
		}{{f.eni1, gw1, f.eni1MAC, "10.77.1.0/24"}, {f.eni2, gw2, f.eni2MAC, "10.77.2.0/24"}} {
			if err := d.PutENI(e.ifindex, e.gw, e.mac, prefix(e.subnet)); err != nil {
				return err
			}
		}
		for _, p := range []struct {
			ip        netip.Addr
			veth, eni int
		}{{pod1IP, f.host1, f.eni1}, {pod2IP, f.host2, f.eni2}} {
			if err := d.PutPod(p.ip, p.veth, p.eni); err != nil {
				return err
			}
			if err := d.AttachPodVeth(p.veth); err != nil {
				return err
			}
			// Attaching twice is cheap and changes nothing.
			if err := d.AttachPodVeth(p.veth); err != nil {
				return err
			}
		}
		return nil
	})
}

func (f *fabric) config(root string, mode AttachMode) Config {
	return Config{
		PinRoot:   root,
		VPCCIDRs:  []netip.Prefix{prefix("10.77.0.0/16")},
		NodeIPs:   []netip.Addr{addr("10.77.1.10"), addr("10.77.2.10")},
		HostCIDRs: []netip.Prefix{prefix("10.96.0.0/16")},
		SNAT:      true,
		Attach:    mode,
	}
}

func (f *fabric) open(t *testing.T, cfg Config) *Datapath {
	t.Helper()
	var d *Datapath
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	f.nodeDo(t, "opening the datapath", func() (err error) {
		d, err = Open(cfg)
		return err
	})
	return d
}

// start opens a datapath on the node with a fresh pin root, wires the fabric into it, and uninstalls it
// when the test ends.
func (f *fabric) start(t *testing.T, mode AttachMode) *Datapath {
	t.Helper()
	return f.startWith(t, mode, func(*Config) {})
}

// startWithPolicy is start with NetworkPolicy enforcement on (the FORWARD hook attached).
func (f *fabric) startWithPolicy(t *testing.T, mode AttachMode) *Datapath {
	t.Helper()
	return f.startWith(t, mode, func(cfg *Config) { cfg.NetworkPolicy = true })
}

// startWith is start with the config changed by set.
func (f *fabric) startWith(t *testing.T, mode AttachMode, set func(*Config)) *Datapath {
	t.Helper()
	root := testPinRoot(t)
	cfg := f.config(root, mode)
	set(&cfg)
	d := f.open(t, cfg)
	t.Cleanup(func() {
		_ = d.Close()
		_ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) })
	})
	f.wire(t, d)
	return d
}

// listenUDP opens a UDP socket on at (IPv4 or IPv6) in netns n, closed when the test ends.
func listenUDP(t *testing.T, n ns.NetNS, at netip.AddrPort) net.PacketConn {
	t.Helper()
	var conn net.PacketConn
	if err := n.Do(func(ns.NetNS) (err error) {
		conn, err = net.ListenPacket("udp", at.String())
		return err
	}); err != nil {
		t.Fatalf("listening on %s: %v", at, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// serveUDPEcho answers every datagram to addr:port in netns n with the same bytes.
func serveUDPEcho(t *testing.T, n ns.NetNS, at netip.AddrPort) {
	t.Helper()
	conn := listenUDP(t, n, at)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteTo(buf[:n], from)
		}
	}()
}

// udpExchange sends from netns n (bound to src when valid) to dst and waits for the echo, retrying until
// the deadline: the first packets may wait on ARP.
func udpExchange(n ns.NetNS, src netip.Addr, dst netip.AddrPort, within time.Duration) error {
	return udpExchangeSized(n, src, dst, 0, 0, within)
}

// udpExchangeSized is udpExchange with size bytes of payload (0: a short message) and the given TTL or hop
// limit (0: the default), over dst's family.
func udpExchangeSized(n ns.NetNS, src netip.Addr, dst netip.AddrPort, size, hops int, within time.Duration) error {
	var conn *net.UDPConn
	if err := n.Do(func(ns.NetNS) (err error) {
		var laddr *net.UDPAddr
		if src.IsValid() {
			laddr = &net.UDPAddr{IP: src.AsSlice()}
		}
		conn, err = net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		return fmt.Errorf("dialing %s: %w", dst, err)
	}
	defer conn.Close()
	if hops > 0 {
		if err := setHops(conn, dst.Addr().Is6(), hops); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(within)
	msg := []byte("eniwire " + dst.String())
	if size > len(msg) {
		msg = append(msg, make([]byte, size-len(msg))...)
	}
	buf := make([]byte, 65536)
	var last error
	for time.Now().Before(deadline) {
		if _, err := conn.Write(msg); err != nil {
			last = err
			time.Sleep(100 * time.Millisecond) // ICMP errors surface as write errors; pace the retry
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		nr, err := conn.Read(buf)
		if err == nil && string(buf[:nr]) == string(msg) {
			return nil
		}
		last = err
	}
	return fmt.Errorf("no echo from %s within %s: %v", dst, within, last)
}

// setHops sets a socket's unicast TTL (IPv4) or hop limit (IPv6).
func setHops(conn *net.UDPConn, ipv6 bool, hops int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	level, opt := unix.IPPROTO_IP, unix.IP_TTL
	if ipv6 {
		level, opt = unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, hops) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting the hop limit: %w", serr)
	}
	return nil
}

// waitCounter waits until a verdict's counter reaches at least min packets.
func waitCounter(t *testing.T, r *Reader, v Verdict, min uint64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := r.Counter(v)
		if err != nil {
			t.Fatal(err)
		}
		if c.Packets >= min {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counter %s/%s = %d packets, want at least %d", v.Program(), v, c.Packets, min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counterNow(t testing.TB, r *Reader, v Verdict) uint64 {
	t.Helper()
	c, err := r.Counter(v)
	if err != nil {
		t.Fatal(err)
	}
	return c.Packets
}

// addServiceDNAT makes svcIP:53 a "Service" DNAT'ed by the node to the VPC host, routed by the node's
// main table out of eni1 (the primary ENI), as kube-proxy would leave it.
func (f *fabric) addServiceDNAT(t *testing.T, nft string) {
	t.Helper()
	f.addDNAT(t, nft, "udp", netip.AddrPortFrom(svcIP, 53), netip.AddrPortFrom(vpcHost, 7000))
	f.nodeDo(t, "routing the VPC host", func() error {
		return netlink.RouteAdd(&netlink.Route{Dst: hostNet(vpcHost), Gw: gw1.AsSlice(), LinkIndex: f.eni1})
	})
}

// addDNAT makes svc a "Service" the node DNATs to backend (proto "tcp" or "udp"), as kube-proxy would.
func (f *fabric) addDNAT(t *testing.T, nft, proto string, svc, backend netip.AddrPort) {
	t.Helper()
	rules := fmt.Sprintf(`table ip kubeproxysim {
	chain pre { type nat hook prerouting priority dstnat; ip daddr %s %s dport %d dnat to %s; }
}
`, svc.Addr(), proto, svc.Port(), backend)
	f.nodeDo(t, "adding the Service DNAT", func() error {
		cmd := exec.Command(nft, "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %v: %s", err, out)
		}
		return nil
	})
}
