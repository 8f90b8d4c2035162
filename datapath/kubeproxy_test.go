package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/internal/testenv"
)

// The three failures of issue 16, on a node whose Services are programmed the way kube-proxy programs
// them, in its iptables mode and in its nftables mode:
//   - a pod asking a Service whose backend is a pod of the same node (TCP and UDP);
//   - a VPC client opening a connection to a pod port the node itself has connected to (kubelet's probes),
//     with the INVALID-dropping rule kube-proxy's iptables mode installs;
//   - a VPC client reaching a NodePort with externalTrafficPolicy: Local (the same DNAT as a hostPort):
//     the backend pod's reply must leave through the host's un-DNAT.
//
// Fabric addresses (fabric_test.go): pod1 10.77.1.21 on eni1, pod2 10.77.2.22 on eni2, the node's
// addresses 10.77.1.10 (eni1, its primary) and 10.77.2.10; the vpc namespace holds 10.77.1.1, 10.77.2.1.
var (
	kpClusterIP = addr("10.96.0.20") // ClusterIP of a Service whose only endpoint is pod2
	kpNodeIP    = addr("10.77.1.10") // the node's primary address
	kpNodePort  = uint16(30080)      // NodePort of that Service, externalTrafficPolicy: Local
	kpBackend   = uint16(8080)       // pod2's TCP port behind the Service
	kpDNS       = uint16(5353)       // pod2's UDP port behind the Service's port 53
	kpPod2TCP   = netip.AddrPortFrom(pod2IP, kpBackend)
	kpPod2UDP   = netip.AddrPortFrom(pod2IP, kpDNS)
	kpSvcTCP    = netip.AddrPortFrom(kpClusterIP, 80)
	kpSvcUDP    = netip.AddrPortFrom(kpClusterIP, 53)
	kpNodePortA = netip.AddrPortFrom(kpNodeIP, kpNodePort)
)

func TestKubeProxyIptablesFlowsStayWhole(t *testing.T) {
	t.Parallel()
	testKubeProxyFlows(t, iptablesRules)
}

func TestKubeProxyNftablesFlowsStayWhole(t *testing.T) {
	t.Parallel()
	testKubeProxyFlows(t, nftablesRules)
}

func testKubeProxyFlows(t *testing.T, rules func(t *testing.T, f *fabric)) {
	f := newFabric(t)
	d := f.start(t, AttachAuto)
	serveTCPEcho(t, f.pod2, kpPod2TCP)
	serveUDPEcho(t, f.pod2, kpPod2UDP)
	rules(t, f)

	t.Run("a pod reaches a TCP Service whose backend is a pod of the same node", func(t *testing.T) {
		before := counterNow(t, d.Reader, VerdictFromPodHostFlow)
		if err := tcpExchange(f.pod1, kpSvcTCP, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		// The backend's SYN-ACK and echo at least: its replies went to the host, not into pod1.
		waitCounter(t, d.Reader, VerdictFromPodHostFlow, before+2)
	})
	t.Run("a pod reaches a UDP Service whose backend is a pod of the same node", func(t *testing.T) {
		before := counterNow(t, d.Reader, VerdictFromPodHostFlow)
		if err := udpExchange(f.pod1, netip.Addr{}, kpSvcUDP, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodHostFlow, before+1)
	})
	t.Run("a VPC client reaches a pod port the node has connected to", func(t *testing.T) {
		// What kubelet's TCP and HTTP probes do every few seconds.
		if err := tcpExchange(f.node, kpPod2TCP, 5*time.Second); err != nil {
			t.Fatalf("the node's own connection: %v", err)
		}
		inBefore := counterNow(t, d.Reader, VerdictToPodToPeer)
		outBefore := counterNow(t, d.Reader, VerdictFromPodOutENI)
		for i := range 3 {
			if err := tcpExchange(f.vpc, kpPod2TCP, 5*time.Second); err != nil {
				t.Fatalf("VPC client connection %d: %v", i, err)
			}
			if err := tcpExchange(f.node, kpPod2TCP, 5*time.Second); err != nil {
				t.Fatalf("the node's connection after the VPC client's: %v", err)
			}
		}
		// The VPC client's flows took the fast path both ways: SYN, ACK, data and FIN in, as many out.
		waitCounter(t, d.Reader, VerdictToPodToPeer, inBefore+3*3)
		waitCounter(t, d.Reader, VerdictFromPodOutENI, outBefore+3*3)
	})
	t.Run("a VPC client reaches a NodePort (externalTrafficPolicy: Local) whose backend is a pod", func(t *testing.T) {
		before := counterNow(t, d.Reader, VerdictFromPodHostFlow)
		if err := tcpExchange(f.vpc, kpNodePortA, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictFromPodHostFlow, before+2)
	})
}

// iptablesRules programs the node as kube-proxy's iptables mode does for the Service above (chains and
// rules of the same shape, with one endpoint): the forward chain drops INVALID packets, the nat chains
// DNAT the ClusterIP and the NodePort, and only hairpin traffic is masqueraded (no --cluster-cidr, as on
// EKS).
func iptablesRules(t *testing.T, f *fabric) {
	t.Helper()
	restore := testenv.RequireTool(t, "iptables-restore")
	dnat := func(proto string, port uint16) string {
		return fmt.Sprintf("-p %s -m %s -j DNAT --to-destination %s:%d", proto, proto, pod2IP, port)
	}
	rules := strings.Join([]string{
		"*filter",
		":KUBE-FORWARD - [0:0]",
		`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
		`-A KUBE-FORWARD -m conntrack --ctstate INVALID -m comment --comment "kubernetes: drop invalid" -j DROP`,
		"-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT",
		"-A KUBE-FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"COMMIT",
		"*nat",
		":KUBE-SERVICES - [0:0]", ":KUBE-NODEPORTS - [0:0]", ":KUBE-POSTROUTING - [0:0]", ":KUBE-MARK-MASQ - [0:0]",
		":KUBE-SVC-TCP - [0:0]", ":KUBE-SVC-UDP - [0:0]", ":KUBE-SEP-TCP - [0:0]", ":KUBE-SEP-UDP - [0:0]",
		":KUBE-EXT-TCP - [0:0]", ":KUBE-SVL-TCP - [0:0]", ":KUBE-SEP-TCPL - [0:0]",
		"-A PREROUTING -j KUBE-SERVICES",
		"-A OUTPUT -j KUBE-SERVICES",
		"-A POSTROUTING -j KUBE-POSTROUTING",
		"-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
		"-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
		"-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
		"-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
		fmt.Sprintf("-A KUBE-SERVICES -d %s/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-TCP", kpClusterIP),
		fmt.Sprintf("-A KUBE-SERVICES -d %s/32 -p udp -m udp --dport 53 -j KUBE-SVC-UDP", kpClusterIP),
		"-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
		"-A KUBE-SVC-TCP -j KUBE-SEP-TCP",
		"-A KUBE-SVC-UDP -j KUBE-SEP-UDP",
		fmt.Sprintf("-A KUBE-SEP-TCP -s %s/32 -j KUBE-MARK-MASQ", pod2IP),
		"-A KUBE-SEP-TCP " + dnat("tcp", kpBackend),
		fmt.Sprintf("-A KUBE-SEP-UDP -s %s/32 -j KUBE-MARK-MASQ", pod2IP),
		"-A KUBE-SEP-UDP " + dnat("udp", kpDNS),
		fmt.Sprintf("-A KUBE-NODEPORTS -p tcp -m tcp --dport %d -j KUBE-EXT-TCP", kpNodePort),
		// externalTrafficPolicy: Local: external clients keep their address (no KUBE-MARK-MASQ).
		"-A KUBE-EXT-TCP -j KUBE-SVL-TCP",
		"-A KUBE-SVL-TCP -j KUBE-SEP-TCPL",
		fmt.Sprintf("-A KUBE-SEP-TCPL -s %s/32 -j KUBE-MARK-MASQ", pod2IP),
		"-A KUBE-SEP-TCPL " + dnat("tcp", kpBackend),
		"COMMIT",
		"",
	}, "\n")
	f.nodeDo(t, "programming Services with iptables", func() error {
		cmd := exec.Command(restore, "-w")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("iptables-restore: %v: %s", err, out)
		}
		return nil
	})
}

// nftablesRules programs the node as kube-proxy's nftables mode does for the Service above: verdict maps
// from ClusterIP and NodePort to per-Service chains, DNAT in per-endpoint chains, masquerading of marked
// (hairpin) traffic. Its forward chain drops no INVALID packets.
func nftablesRules(t *testing.T, f *fabric) {
	t.Helper()
	nft := testenv.RequireTool(t, "nft")
	rules := fmt.Sprintf(`table ip kube-proxy {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { %[1]s . tcp . 80 : goto service-tcp, %[1]s . udp . 53 : goto service-udp }
	}
	map service-nodeports {
		type inet_proto . inet_service : verdict
		elements = { tcp . %[3]d : goto external-tcp }
	}
	chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
	chain nat-output { type nat hook output priority -100; policy accept; jump services; }
	chain nat-postrouting { type nat hook postrouting priority srcnat; policy accept; jump masquerading; }
	chain mark-for-masquerade { meta mark set meta mark | 0x4000; }
	chain masquerading {
		meta mark & 0x4000 == 0 return
		meta mark set meta mark ^ 0x4000
		masquerade fully-random
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
	}
	chain service-tcp { jump endpoint-tcp; }
	chain service-udp { jump endpoint-udp; }
	chain external-tcp { jump endpoint-tcp; }
	chain endpoint-tcp { ip saddr %[2]s jump mark-for-masquerade; meta l4proto tcp dnat to %[2]s:%[4]d; }
	chain endpoint-udp { ip saddr %[2]s jump mark-for-masquerade; meta l4proto udp dnat to %[2]s:%[5]d; }
}
`, kpClusterIP, pod2IP, kpNodePort, kpBackend, kpDNS)
	f.nodeDo(t, "programming Services with nftables", func() error {
		cmd := exec.Command(nft, "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %v: %s", err, out)
		}
		return nil
	})
}

// serveTCPEcho echoes every connection to at in netns n.
func serveTCPEcho(t *testing.T, n ns.NetNS, at netip.AddrPort) {
	t.Helper()
	serveTCP(t, n, at, func(c net.Conn) {
		buf := make([]byte, 2048)
		for {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			nr, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:nr]); err != nil {
				return
			}
		}
	})
}

// serveTCP listens on at in netns n until the test ends and hands every connection to handle, which runs
// on a goroutine of its own; the connection is closed when handle returns.
func serveTCP(t *testing.T, n ns.NetNS, at netip.AddrPort, handle func(net.Conn)) {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func(ns.NetNS) (err error) {
		ln, err = net.Listen("tcp4", at.String())
		return err
	}); err != nil {
		t.Fatalf("listening on %s: %v", at, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// tcpExchange connects from netns n to dst, sends a message and waits for its echo.
func tcpExchange(n ns.NetNS, dst netip.AddrPort, within time.Duration) error {
	var c net.Conn
	if err := n.Do(func(ns.NetNS) (err error) {
		c, err = net.DialTimeout("tcp4", dst.String(), within)
		return err
	}); err != nil {
		return fmt.Errorf("connecting to %s: %w", dst, err)
	}
	defer c.Close()
	return echoOn(c, dst, within)
}

// echoOn sends a message on c, connected to dst, and waits for its echo.
func echoOn(c net.Conn, dst netip.AddrPort, within time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(within))
	msg := []byte("eniwire tcp " + dst.String())
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("writing to %s: %w", dst, err)
	}
	buf := make([]byte, len(msg))
	for got := 0; got < len(msg); {
		nr, err := c.Read(buf[got:])
		if err != nil {
			return fmt.Errorf("reading the echo of %s (%d of %d bytes): %w", dst, got, len(msg), err)
		}
		got += nr
	}
	if string(buf) != string(msg) {
		return fmt.Errorf("echo from %s = %q, want %q", dst, buf, msg)
	}
	return nil
}
