package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

const (
	// m5.large: 10 addresses per ENI, so the primary ENI holds 9 pods and the tenth lands on ENI 2.
	podsOnPrimary = 9
	serviceIP     = "10.96.0.10"
	servicePort   = 80
	echoPort      = 8080
)

// TestANodeMovesPodPacketsWithTheBPFDatapath walks one simulated node through docs/design.md's flow: the agent
// starts with the BPF datapath and installs the CNI configuration once ready, pods added through libcni
// spill from the primary ENI onto a second one, and every path of steps 5-8 is exercised for real.
func TestANodeMovesPodPacketsWithTheBPFDatapath(t *testing.T) {
	w := newWorld(t, "MINIMUM_IP_TARGET=12", "WARM_IP_TARGET=2")
	rulesBefore, err := w.nodeOutput("", "ip", "-j", "rule", "show")
	must(t, err)

	vpcHost, inet := w.fab.VPCHost(), w.fab.Internet()
	vpcEcho := netip.AddrPortFrom(vpcHost.IP, echoPort)
	inetEcho := netip.AddrPortFrom(inet.IP, echoPort)
	echo(t, vpcHost.NetnsPath, vpcEcho)
	echo(t, inet.NetnsPath, inetEcho)

	w.startAgent()
	t.Cleanup(func() {
		if err := w.stopAgent(syscall.SIGTERM); err != nil {
			t.Errorf("stopping the agent: %v", err)
		}
		if out, err := w.runUninstall(); err != nil {
			t.Errorf("uninstalling: %v\n%s", err, out)
		}
		// Uninstall leaves no pinned map, no SNAT table and no conflist behind.
		if left, _ := os.ReadDir(filepath.Join(w.pinRoot, "maps")); len(left) != 0 {
			t.Errorf("uninstall left %d pinned maps", len(left))
		}
		if _, err := w.nodeOutput("", "nft", "list", "table", "ip", "eniwire"); err == nil {
			t.Errorf("uninstall left the SNAT table")
		}
		if _, err := os.Stat(filepath.Join(w.confDir, "10-eniwire.conflist")); err == nil {
			t.Errorf("uninstall left the conflist")
		}
		if t.Failed() {
			t.Logf("agent log (tail):\n%s", w.agentLog())
		}
	})
	ctx := ctxFor(t, 4*time.Minute)

	var pods []*pod
	for i := range podsOnPrimary + 1 {
		pods = append(pods, w.addPod(fmt.Sprintf("pod%d", i)))
	}
	onPrimary, onENI2 := pods[0], pods[podsOnPrimary]
	other := pods[1]
	for _, p := range pods {
		echo(t, p.ns.Path(), netip.AddrPortFrom(p.ip, echoPort))
	}
	eni2 := onENI2.eni

	t.Run("the agent installed the plugin and the conflist only once ready", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(w.binDir, "eniwire")); err != nil {
			t.Errorf("plugin not installed: %v", err)
		}
		if onPrimary.eni != w.inst.PrimaryENI {
			t.Errorf("%s is on %s, want the primary ENI %s", onPrimary.name, onPrimary.eni, w.inst.PrimaryENI)
		}
		if eni2 == w.inst.PrimaryENI {
			t.Fatalf("the %dth pod is still on the primary ENI; nothing spilled onto ENI 2", podsOnPrimary+1)
		}
	})

	t.Run("the second ENI is up at the VPC's MTU with only its primary IP as a /32 and a loose reverse-path check", func(t *testing.T) {
		h, err := netlink.NewHandleAt(mustNetns(t, w.node.NetnsPath))
		must(t, err)
		defer h.Close()
		var mac, primaryIP string
		for _, e := range w.sim.Snapshot().ENIs {
			if e.ID == eni2 {
				mac, primaryIP = e.MAC, e.PrimaryIP
			}
		}
		n, err := w.fab.Node(w.inst.ID)
		must(t, err)
		l, err := h.LinkByName(n.Links[mac])
		must(t, err)
		if l.Attrs().Flags&net.FlagUp == 0 || l.Attrs().MTU != 9001 {
			t.Errorf("%s: flags %v, MTU %d; want up at 9001", l.Attrs().Name, l.Attrs().Flags, l.Attrs().MTU)
		}
		addrs, _ := h.AddrList(l, netlink.FAMILY_V4)
		if len(addrs) != 1 || addrs[0].IPNet.String() != primaryIP+"/32" {
			t.Errorf("%s carries %v, want only %s/32", l.Attrs().Name, addrs, primaryIP)
		}
		rp, err := w.nodeOutput("", "cat", "/proc/sys/net/ipv4/conf/"+l.Attrs().Name+"/rp_filter")
		must(t, err)
		fwd, err := w.nodeOutput("", "cat", "/proc/sys/net/ipv4/ip_forward")
		must(t, err)
		if strings.TrimSpace(rp) != "2" || strings.TrimSpace(fwd) != "1" {
			t.Errorf("rp_filter on %s = %q, ip_forward = %q; want 2 and 1", l.Attrs().Name, rp, fwd)
		}
	})

	t.Run("a pod's eth0 and host veth are at the default AWS_VPC_ENI_MTU, 9001", func(t *testing.T) {
		w.assertVethMTU(t, onPrimary, 9001)
	})

	for _, c := range []struct {
		name     string
		from     *pod
		to       netip.AddrPort
		wantSeen netip.Addr
	}{
		{"a pod on the primary ENI reaches the VPC host with its own address", onPrimary, vpcEcho, onPrimary.ip},
		{"a pod on ENI 2 reaches the VPC host with its own address", onENI2, vpcEcho, onENI2.ip},
		{"a pod on the primary ENI reaches the internet through the node's SNAT", onPrimary, inetEcho, w.node.PrimaryIP},
		{"a pod on ENI 2 reaches the internet through the node's SNAT", onENI2, inetEcho, w.node.PrimaryIP},
		{"a pod on the primary ENI reaches a pod on ENI 2", onPrimary, netip.AddrPortFrom(onENI2.ip, echoPort), onPrimary.ip},
		{"a pod on ENI 2 reaches a pod on the primary ENI", onENI2, netip.AddrPortFrom(onPrimary.ip, echoPort), onENI2.ip},
		{"two pods of the primary ENI reach each other", other, netip.AddrPortFrom(onPrimary.ip, echoPort), other.ip},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen, err := talk(ctx, c.from, c.to, 5)
			if err != nil {
				w.debugDump(t)
				t.Fatal(err)
			}
			if seen != c.wantSeen {
				t.Errorf("the server saw source %s, want %s", seen, c.wantSeen)
			}
		})
	}

	t.Run("a pod on ENI 2 sends to the VPC through ENI 2", func(t *testing.T) {
		const n = 40
		before, _, err := w.fab.ENICounters(eni2)
		must(t, err)
		if _, err := talk(ctx, onENI2, vpcEcho, n); err != nil {
			t.Fatal(err)
		}
		after, _, err := w.fab.ENICounters(eni2)
		must(t, err)
		if after-before < n {
			t.Errorf("the router received %d packets from ENI 2 during %d exchanges; the pod's packets left elsewhere", after-before, n)
		}
	})

	t.Run("a pod on ENI 2 reaches the VPC host through a DNAT'ed Service IP, leaving by ENI 2", func(t *testing.T) {
		rules := fmt.Sprintf(`table ip e2e_svc {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s tcp dport %d dnat to %s
	}
}
`, serviceIP, servicePort, vpcEcho)
		_, err := w.nodeOutput(rules, "nft", "-f", "-")
		must(t, err)
		t.Cleanup(func() { _, _ = w.nodeOutput("", "nft", "delete", "table", "ip", "e2e_svc") })
		const n = 40
		before, _, err := w.fab.ENICounters(eni2)
		must(t, err)
		seen, err := talk(ctx, onENI2, netip.AddrPortFrom(netip.MustParseAddr(serviceIP), servicePort), n)
		if err != nil {
			w.debugDump(t)
			t.Fatal(err)
		}
		after, _, err := w.fab.ENICounters(eni2)
		must(t, err)
		if seen != onENI2.ip {
			t.Errorf("the VPC host saw %s, want the pod's own address %s", seen, onENI2.ip)
		}
		if after-before < n {
			t.Errorf("the router received %d packets from ENI 2 during %d exchanges through the Service", after-before, n)
		}
	})

	t.Run("a pod sending from an address that is not its own is dropped and counted", func(t *testing.T) {
		// The VPC host listens on UDP and reports every sender; the ENIs' router-side rx counters and the
		// source check show whether anything reached the router at all.
		sinkAddr := netip.AddrPortFrom(vpcHost.IP, echoPort+1)
		heard := udpSink(t, vpcHost.NetnsPath, sinkAddr)
		for _, s := range []struct {
			what string
			from *pod
			src  netip.Addr
		}{
			{"an unassigned VPC address", onENI2, netip.MustParseAddr("10.0.15.250")},
			// The worst case: onPrimary's address is valid on the primary ENI, so the VPC's source check
			// would let it through there. Only the per-veth check in from_pod stops it.
			{"the address of a pod on another ENI", onENI2, onPrimary.ip},
			{"the address of a pod on the same ENI", other, onPrimary.ip},
		} {
			t.Run(s.what, func(t *testing.T) {
				before := w.spoofDrops(t)
				drops0, err := w.fab.SourceCheckDrops()
				must(t, err)
				rx0 := eniRx(t, w, w.inst.PrimaryENI, eni2)
				const n = 10
				must(t, sendSpoofed(s.from, s.src, sinkAddr, n))
				w.waitSpoofDrops(t, before, n)
				// The sender's own datagram comes after the spoofed ones: once it arrived, any spoofed one that
				// got out would have too.
				must(t, sendUntilHeard(s.from, sinkAddr, heard, 5*time.Second, func(src netip.Addr) {
					t.Errorf("the VPC host received a datagram from %s", src)
				}))
				if drops, err := w.fab.SourceCheckDrops(); err != nil || drops != drops0 {
					t.Errorf("the VPC router saw spoofed packets (source-check drops %d -> %d, %v); the node must drop them", drops0, drops, err)
				}
				// The sender's own exchange is a datagram or two plus ARP at most; n spoofed ones would show.
				for eni, rx := range eniRx(t, w, w.inst.PrimaryENI, eni2) {
					if rx-rx0[eni] >= n {
						t.Errorf("the router received %d packets from %s while %d spoofed datagrams were sent", rx-rx0[eni], eni, n)
					}
				}
			})
		}
	})

	t.Run("the per-pod traffic map is sized by the node's max pods (m5.large: 3 ENIs x 9 IPs + 2)", func(t *testing.T) {
		out, err := exec.Command("bpftool", "-j", "map", "show", "pinned", filepath.Join(w.pinRoot, "maps", "pod_stats")).Output()
		must(t, err)
		var m struct {
			MaxEntries int `json:"max_entries"`
		}
		must(t, json.Unmarshal(out, &m))
		if m.MaxEntries != 3*9+2 {
			t.Errorf("pod_stats holds %d entries at most, want %d", m.MaxEntries, 3*9+2)
		}
	})

	t.Run("bpftool shows the pinned pods map with readable keys and values", func(t *testing.T) {
		out, err := exec.Command("bpftool", "-j", "map", "dump", "pinned", filepath.Join(w.pinRoot, "maps", "pods")).Output()
		must(t, err)
		checkPodsDump(t, out, pods)
	})

	t.Run("an established TCP flow survives SIGTERM and kill -9 restarts of the agent", func(t *testing.T) {
		f := startFlow(ctx, t, onENI2, vpcEcho)
		f.waitMore(t, 10)
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			if err := w.stopAgent(sig); err != nil {
				t.Errorf("stopping the agent with %v: %v", sig, err)
			}
			f.waitMore(t, 10) // the pinned programs and maps carry the flow while no agent runs
			w.startAgent()
			f.waitMore(t, 10)
		}
		if err := f.stop(); err != nil {
			t.Errorf("the flow broke: %v", err)
		}
		t.Logf("%d exchanges over one connection across two restarts", f.count())
		// The restarted agent still serves pods.
		late := w.addPod("late")
		if _, err := talk(ctx, late, vpcEcho, 3); err != nil {
			t.Errorf("a pod added after the restarts: %v", err)
		}
	})

	t.Run("the node's ip rule list is as the distribution left it", func(t *testing.T) {
		after, err := w.nodeOutput("", "ip", "-j", "rule", "show")
		must(t, err)
		if after != rulesBefore {
			t.Errorf("ip rules changed:\nbefore %s\nafter  %s", rulesBefore, after)
		}
	})
}

func mustNetns(t *testing.T, path string) netns.NsHandle {
	t.Helper()
	h, err := netns.GetFromPath(path)
	must(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}

// udpSink reports the source of every datagram that reaches addr inside a netns, until the test ends.
func udpSink(t *testing.T, nsPath string, addr netip.AddrPort) <-chan netip.Addr {
	t.Helper()
	var c net.PacketConn
	must(t, vpcfabric.Do(nsPath, func() (err error) {
		c, err = net.ListenPacket("udp4", addr.String())
		return err
	}))
	t.Cleanup(func() { c.Close() })
	heard := make(chan netip.Addr, 256)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case heard <- from.(*net.UDPAddr).AddrPort().Addr().Unmap():
			default:
			}
		}
	}()
	return heard
}

// sendUntilHeard sends datagrams from p's own address to dst until the sink hears p, calling other for
// every other source the sink reports meanwhile.
func sendUntilHeard(p *pod, dst netip.AddrPort, heard <-chan netip.Addr, within time.Duration, other func(netip.Addr)) error {
	var c *net.UDPConn
	if err := vpcfabric.Do(p.ns.Path(), func() (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, err := fmt.Fprintf(c, "from %s", p.name); err != nil {
			return err
		}
		wait := time.After(200 * time.Millisecond)
		for {
			select {
			case src := <-heard:
				if src == p.ip {
					return nil
				}
				other(src)
				continue
			case <-wait:
			}
			break
		}
	}
	return fmt.Errorf("the sink never heard %s (%s) within %s", p.name, p.ip, within)
}

// eniRx reads the router-side rx packet counter of each ENI: what the node sent out of it.
func eniRx(t *testing.T, w *world, enis ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, e := range enis {
		rx, _, err := w.fab.ENICounters(e)
		must(t, err)
		out[e] = rx
	}
	return out
}

// sendSpoofed sends n UDP datagrams from p with source src, IPv4 or IPv6: the address is added to the pod's
// eth0 (an IPv6 one without duplicate address detection) so the socket can bind it, as a compromised pod could.
func sendSpoofed(p *pod, src netip.Addr, dst netip.AddrPort, n int) error {
	return vpcfabric.Do(p.ns.Path(), func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		a := &netlink.Addr{IPNet: &net.IPNet{IP: src.AsSlice(), Mask: net.CIDRMask(src.BitLen(), src.BitLen())}}
		network := "udp4"
		if src.Is6() {
			a.Flags, network = unix.IFA_F_NODAD, "udp6"
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			return fmt.Errorf("adding %s to %s: %w", src, p.name, err)
		}
		defer netlink.AddrDel(l, a)
		c, err := net.DialUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range n {
			if _, err := fmt.Fprintf(c, "spoofed %d", i); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkPodsDump asserts that bpftool decoded the pods map with BTF: named fields, every pod's address as
// a key and its veth as host_ifindex.
func checkPodsDump(t *testing.T, out []byte, pods []*pod) {
	t.Helper()
	var entries []struct {
		Formatted struct {
			Key   map[string]any `json:"key"`
			Value map[string]any `json:"value"`
		} `json:"formatted"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatalf("bpftool output is not a list of key/value objects: %v\n%s", err, out)
	}
	byIP := map[netip.Addr]map[string]any{}
	for _, e := range entries {
		e := e.Formatted
		raw, ok := e.Key["addr"].([]any)
		if !ok || len(raw) != 16 {
			t.Fatalf("key %v has no 16-byte addr field: BTF names missing?\n%s", e.Key, out)
		}
		var b [16]byte
		for i, v := range raw {
			f, _ := v.(float64)
			b[i] = byte(f)
		}
		byIP[netip.AddrFrom16(b).Unmap()] = e.Value
	}
	for _, p := range pods {
		v, ok := byIP[p.ip]
		if !ok {
			t.Errorf("pod %s (%s) is not in the dump", p.name, p.ip)
			continue
		}
		for _, field := range []string{"host_ifindex", "eni_ifindex"} {
			if n, _ := v[field].(float64); n <= 0 {
				t.Errorf("pod %s: value %v has no positive %s", p.name, v, field)
			}
		}
	}
}

// debugDump logs what explains a lost packet: the books, the programs' verdicts, the node's drop counters,
// neighbours and netfilter rules, and the router's routes and link counters.
func (w *world) debugDump(t *testing.T) {
	as, _ := w.client.Assignments(context.Background())
	for _, a := range as {
		t.Logf("assignment %s %s", a.IP, a.ENI)
	}
	for _, e := range w.sim.Snapshot().ENIs {
		t.Logf("sim ENI %s %v", e.ID, e.IPs)
	}
	o4, _ := w.nodeOutput("", "sh", "-c", "grep . /proc/sys/net/ipv4/conf/*/rp_filter /proc/sys/net/ipv4/conf/*/forwarding; nstat -asz | grep -v ' 0 '; cat /proc/net/nf_conntrack 2>&1 | head")
	t.Logf("sys:\n%s", o4)
	o5, _ := w.nodeOutput("", "nft", "list", "ruleset")
	t.Logf("nft:\n%s", o5)
	resp, err := w.node.HTTPClient().Get(metricsURL + "/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "eniwire_datapath_packets") {
				t.Log(l)
			}
		}
	}
	d, err := w.fab.SourceCheckDrops()
	t.Logf("source check drops %d %v", d, err)
	out, _ := w.nodeOutput("", "ip", "neigh")
	t.Logf("node neigh:\n%s", out)
	rn, _ := w.fab.Router()
	o2, _ := exec.Command("ip", "netns", "exec", rn, "ip", "route").CombinedOutput()
	t.Logf("router routes:\n%s", o2)
	o3, _ := exec.Command("ip", "netns", "exec", rn, "ip", "-s", "link").CombinedOutput()
	t.Logf("router links:\n%s", o3)
}
