package datapath

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/testenv"
)

// TestPolicyBetweenPodsOnTheNode: real veths, real sockets, pod-to-pod on the node (redirect_peer) under a
// deny policy, then an allow, then the allow removed under an open connection.
func TestPolicyBetweenPodsOnTheNode(t *testing.T) {
	t.Parallel()
	f := newFabric(t)
	d := f.start(t, AttachTCX)
	ctx := context.Background()
	pod2TCP := netip.AddrPortFrom(pod2IP, 8080)
	serveTCPEcho(t, f.pod2, pod2TCP)
	serveUDPEcho(t, f.pod2, netip.AddrPortFrom(pod2IP, 7001))
	if err := tcpExchange(f.pod1, pod2TCP, 5*time.Second); err != nil {
		t.Fatalf("before any policy: %v", err)
	}

	denyAll := dptypes.PodPolicy{IngressIsolated: true}
	allowPod1 := dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
		{Peer: netip.PrefixFrom(pod1IP, 32), Ports: []dptypes.PortRange{tcp(8080, 8080)}},
	}}

	t.Run("under a default-deny ingress policy pod1 cannot reach pod2", func(t *testing.T) {
		setPolicy(t, d, pod2IP, denyAll)
		wantRefused(t, d, VerdictFromPodIngressDenied, func() error { return tcpExchange(f.pod1, pod2TCP, 700*time.Millisecond) })
	})
	var open net.Conn
	t.Cleanup(func() { closeConn(open) })
	t.Run("an allow from pod1 on TCP 8080 lets pod1 in, and the replies out", func(t *testing.T) {
		setPolicy(t, d, pod2IP, allowPod1)
		allowed := counterNow(t, d.Reader, VerdictFromPodIngressAllowed)
		peer := counterNow(t, d.Reader, VerdictFromPodToPeer)
		open = dialEcho(t, f.pod1, pod2TCP)
		waitCounter(t, d.Reader, VerdictFromPodIngressAllowed, allowed+1)
		// SYN, SYN-ACK, ACK, data, echo at least: both ways on the fast path.
		waitCounter(t, d.Reader, VerdictFromPodToPeer, peer+5)
		if err := udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(pod2IP, 7001), 700*time.Millisecond); err == nil {
			t.Error("UDP reached pod2, whose policy allows TCP 8080 only")
		}
	})
	t.Run("the flow is in the node's conntrack under eniwire's mark", func(t *testing.T) {
		var flows []*netlink.ConntrackFlow
		f.nodeDo(t, "listing conntrack", func() (err error) {
			flows, err = netlink.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
			return err
		})
		local := netip.MustParseAddrPort(open.LocalAddr().String())
		for _, fl := range flows {
			if fl.Forward.SrcPort == local.Port() && fl.Forward.DstPort == 8080 {
				if fl.Mark&eniwireCTTagMask != eniwireCTTag {
					t.Errorf("entry %s: mark %#x, want eniwire's tag %#x", fl, fl.Mark, eniwireCTTag)
				}
				return
			}
		}
		t.Errorf("no conntrack entry for %s -> %s", local, pod2TCP)
	})
	t.Run("removing the allow cuts the open connection", func(t *testing.T) {
		setPolicy(t, d, pod2IP, denyAll)
		wantCut(t, d, VerdictFromPodIngressDenied, open, pod2TCP)
	})
	t.Run("an egress policy of pod1 allowing TCP 8080 to pod2 lets it through, and nothing else", func(t *testing.T) {
		if err := d.ClearPodPolicy(ctx, pod2IP); err != nil {
			t.Fatal(err)
		}
		setPolicy(t, d, pod1IP, dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{
			{Peer: netip.PrefixFrom(pod2IP, 32), Ports: []dptypes.PortRange{tcp(8080, 8080)}},
		}})
		if err := tcpExchange(f.pod1, pod2TCP, 5*time.Second); err != nil {
			t.Fatalf("TCP 8080 under the egress allow: %v", err)
		}
		wantRefused(t, d, VerdictFromPodEgressDenied, func() error {
			return udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(pod2IP, 7001), 700*time.Millisecond)
		})
	})
}

// TestPolicyJudgesAServiceOnItsBackend: pod1 asks a Service whose port (80) differs from its targetPort
// (8080) and whose backend is pod2 on the same node; the host DNATs it, and eniw_forward judges the flow
// on pod2:8080. An allow of the targetPort lets it through; an allow of the Service's port alone does not;
// an allow removed cuts the open connection.
func TestPolicyJudgesAServiceOnItsBackend(t *testing.T) {
	t.Parallel()
	nft := testenv.RequireTool(t, "nft")
	f := newFabric(t)
	d := f.startWithPolicy(t, AttachTCX)
	svc := netip.AddrPortFrom(addr("10.96.0.30"), 80)
	backend := netip.AddrPortFrom(pod2IP, 8080)
	serveTCPEcho(t, f.pod2, backend)
	f.addDNAT(t, nft, "tcp", svc, backend)
	allow := func(port uint16) dptypes.PodPolicy {
		return dptypes.PodPolicy{IngressIsolated: true, Ingress: []dptypes.PeerPorts{
			{Peer: netip.PrefixFrom(pod1IP, 32), Ports: []dptypes.PortRange{tcp(port, port)}},
		}}
	}

	t.Run("an allow of the Service's port alone does not reach the backend", func(t *testing.T) {
		setPolicy(t, d, pod2IP, allow(80))
		wantRefused(t, d, VerdictForwardIngressDenied, func() error { return tcpExchange(f.pod1, svc, 700*time.Millisecond) })
	})
	var open net.Conn
	t.Cleanup(func() { closeConn(open) })
	t.Run("an allow of the targetPort does, replies included", func(t *testing.T) {
		setPolicy(t, d, pod2IP, allow(8080))
		before := counterNow(t, d.Reader, VerdictForwardIngressAllowed)
		open = dialEcho(t, f.pod1, svc)
		waitCounter(t, d.Reader, VerdictForwardIngressAllowed, before+1)
	})
	t.Run("removing the allow cuts the open connection through the Service", func(t *testing.T) {
		setPolicy(t, d, pod2IP, allow(80))
		wantCut(t, d, VerdictForwardIngressDenied, open, svc)
	})
}

// wantRefused runs an exchange that a policy must refuse, and waits for verdict v to count the drop.
func wantRefused(t *testing.T, d *Datapath, v Verdict, exchange func() error) {
	t.Helper()
	before := counterNow(t, d.Reader, v)
	if err := exchange(); err == nil {
		t.Fatalf("the exchange succeeded; want it refused, counted as %s/%s", v.Program(), v)
	}
	waitCounter(t, d.Reader, v, before+1)
}

// wantCut sends on an open connection whose allow was removed: no echo may come (silence, not an error
// of the socket's), and verdict v counts the drop.
func wantCut(t *testing.T, d *Datapath, v Verdict, open net.Conn, dst netip.AddrPort) {
	t.Helper()
	if open == nil {
		t.Fatal("no open connection")
	}
	before := counterNow(t, d.Reader, v)
	if err := echoOn(open, dst, 700*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("echo after the allow was removed: %v, want silence", err)
	}
	waitCounter(t, d.Reader, v, before+1)
}

// dialEcho connects from netns n to dst and checks an echo on the connection, which it returns open: the
// caller closes it (closeConn), when its test ends rather than the subtest's.
func dialEcho(t *testing.T, n ns.NetNS, dst netip.AddrPort) net.Conn {
	t.Helper()
	var c net.Conn
	if err := n.Do(func(ns.NetNS) (err error) {
		c, err = net.DialTimeout("tcp4", dst.String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connecting to %s: %v", dst, err)
	}
	if err := echoOn(c, dst, 5*time.Second); err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	return c
}

func closeConn(c net.Conn) {
	if c != nil {
		_ = c.Close()
	}
}

// TestARestartedAgentReplacesTheForwardHook: an agent that opens the datapath again (a restart, an upgrade)
// loads its own eniw_forward and links it at the FORWARD hooks before the earlier agent's links go; the node
// is never without the hook, and the second open succeeds.
func TestARestartedAgentReplacesTheForwardHook(t *testing.T) {
	t.Parallel()
	f := newFabric(t)
	root := testPinRoot(t)
	cfg := f.config(root, AttachTCX)
	cfg.NetworkPolicy = true
	t.Cleanup(func() { _ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) }) })
	// Two restarts: the latest agent takes the other priority, the third the first one again.
	for range 2 {
		if err := f.open(t, cfg).Close(); err != nil {
			t.Fatal(err)
		}
	}
	latest := f.open(t, cfg)
	t.Cleanup(func() { _ = latest.Close() })
	f.wire(t, latest)
	setPolicy(t, latest, pod2IP, dptypes.PodPolicy{IngressIsolated: true})
	wantRefused(t, latest, VerdictFromPodIngressDenied, func() error {
		return udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(pod2IP, 7001), 700*time.Millisecond)
	})
}
