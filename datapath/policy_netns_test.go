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
		if err := d.SetPodPolicy(ctx, pod2IP, denyAll); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictFromPodIngressDenied)
		if err := tcpExchange(f.pod1, pod2TCP, 700*time.Millisecond); err == nil {
			t.Fatal("pod1 reached pod2 through a deny-all policy")
		}
		waitCounter(t, d.Reader, VerdictFromPodIngressDenied, before+1)
	})
	var open net.Conn
	t.Cleanup(func() {
		if open != nil {
			_ = open.Close()
		}
	})
	t.Run("an allow from pod1 on TCP 8080 lets pod1 in, and the replies out", func(t *testing.T) {
		if err := d.SetPodPolicy(ctx, pod2IP, allowPod1); err != nil {
			t.Fatal(err)
		}
		allowed := counterNow(t, d.Reader, VerdictFromPodIngressAllowed)
		peer := counterNow(t, d.Reader, VerdictFromPodToPeer)
		if err := f.pod1.Do(func(ns.NetNS) (err error) {
			open, err = net.DialTimeout("tcp4", pod2TCP.String(), 5*time.Second)
			return err
		}); err != nil {
			t.Fatalf("connecting under the allow: %v", err)
		}
		if err := echoOn(open, pod2TCP, 5*time.Second); err != nil {
			t.Fatal(err)
		}
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
				if fl.Mark != eniwireCTMark {
					t.Errorf("entry %s: mark %#x, want %#x", fl, fl.Mark, eniwireCTMark)
				}
				return
			}
		}
		t.Errorf("no conntrack entry for %s -> %s", local, pod2TCP)
	})
	t.Run("removing the allow cuts the open connection", func(t *testing.T) {
		if err := d.SetPodPolicy(ctx, pod2IP, denyAll); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictFromPodIngressDenied)
		if err := echoOn(open, pod2TCP, 700*time.Millisecond); err == nil {
			t.Fatal("the open connection still answered after its allow was removed")
		} else if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the open connection failed otherwise than by silence: %v", err)
		}
		waitCounter(t, d.Reader, VerdictFromPodIngressDenied, before+1)
	})
	t.Run("an egress policy of pod1 allowing TCP 8080 to pod2 lets it through, and nothing else", func(t *testing.T) {
		if err := d.ClearPodPolicy(ctx, pod2IP); err != nil {
			t.Fatal(err)
		}
		if err := d.SetPodPolicy(ctx, pod1IP, dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{
			{Peer: netip.PrefixFrom(pod2IP, 32), Ports: []dptypes.PortRange{tcp(8080, 8080)}},
		}}); err != nil {
			t.Fatal(err)
		}
		if err := tcpExchange(f.pod1, pod2TCP, 5*time.Second); err != nil {
			t.Fatalf("TCP 8080 under the egress allow: %v", err)
		}
		before := counterNow(t, d.Reader, VerdictFromPodEgressDenied)
		if err := udpExchange(f.pod1, netip.Addr{}, netip.AddrPortFrom(pod2IP, 7001), 700*time.Millisecond); err == nil {
			t.Error("UDP left pod1, whose egress allows TCP 8080 only")
		}
		waitCounter(t, d.Reader, VerdictFromPodEgressDenied, before+1)
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
	root := testPinRoot(t)
	cfg := f.config(root, AttachTCX)
	cfg.NetworkPolicy = true
	d := f.open(t, cfg)
	t.Cleanup(func() {
		_ = d.Close()
		_ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) })
	})
	f.wire(t, d)
	ctx := context.Background()
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
		if err := d.SetPodPolicy(ctx, pod2IP, allow(80)); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictForwardIngressDenied)
		if err := tcpExchange(f.pod1, svc, 700*time.Millisecond); err == nil {
			t.Fatal("pod1 reached pod2:8080 through the Service with only port 80 allowed")
		}
		waitCounter(t, d.Reader, VerdictForwardIngressDenied, before+1)
	})
	var open net.Conn
	t.Cleanup(func() {
		if open != nil {
			_ = open.Close()
		}
	})
	t.Run("an allow of the targetPort does, replies included", func(t *testing.T) {
		if err := d.SetPodPolicy(ctx, pod2IP, allow(8080)); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictForwardIngressAllowed)
		if err := f.pod1.Do(func(ns.NetNS) (err error) {
			open, err = net.DialTimeout("tcp4", svc.String(), 5*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := echoOn(open, svc, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		waitCounter(t, d.Reader, VerdictForwardIngressAllowed, before+1)
	})
	t.Run("removing the allow cuts the open connection through the Service", func(t *testing.T) {
		if err := d.SetPodPolicy(ctx, pod2IP, allow(80)); err != nil {
			t.Fatal(err)
		}
		before := counterNow(t, d.Reader, VerdictForwardIngressDenied)
		if err := echoOn(open, svc, 700*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("echo after the allow was removed: %v, want silence", err)
		}
		waitCounter(t, d.Reader, VerdictForwardIngressDenied, before+1)
	})
}
