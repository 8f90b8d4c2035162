package datapath

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/internal/linktest"
	"github.com/eniwire/eniwire/internal/testenv"
)

// Path MTU discovery, as on a VPC whose ENIs and pod veths carry jumbo frames (9001) while a hop further on
// (a peering, a VPN, the internet gateway) carries 1500: the hop answers the pod's DF segments with ICMP
// fragmentation needed, and that answer must reach the pod's socket, translated by the host when the flow
// is the host's (a Service), straight through to_pod when it is on the fast path.
const (
	jumboMTU = 9001
	hopMTU   = 1500
)

var (
	farHost    = addr("10.77.8.8") // behind the 1500-byte hop, in the VPC CIDR: the fast path's
	farGW      = addr("10.77.8.1")
	farSink    = netip.AddrPortFrom(farHost, 8080)
	pmtuSvc    = netip.AddrPortFrom(addr("10.96.0.30"), 80) // in the fabric's HostCIDRs: the host's
	pmtuVolume = 8 << 20
)

func TestPathMTUDiscoveryReachesAPodsTCPFlowDirectlyAndThroughAService(t *testing.T) {
	t.Parallel()
	nft := testenv.RequireTool(t, "nft")
	f := newFabric(t)
	far := f.addHopTo(t)
	f.setJumbo(t)
	d := f.start(t, AttachAuto)
	serveByteCount(t, far, farSink)
	f.addDNAT(t, nft, "tcp", pmtuSvc, farSink)
	f.nodeDo(t, "routing the far host", func() error {
		return netlink.RouteAdd(&netlink.Route{Dst: hostNet(farHost), Gw: gw1.AsSlice(), LinkIndex: f.eni1})
	})

	for _, c := range []struct {
		name     string
		dst      netip.AddrPort
		verdict  Verdict // how the pod's segments leave the node
		answered Verdict // how what comes back (answers, ICMP errors) reaches the pod
	}{
		{"directly", farSink, VerdictFromPodOutENI, VerdictToPodToPeer},
		{"through a DNAT'ed Service IP", pmtuSvc, VerdictFromPodToHost, VerdictToPodHostFlow},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, answeredBefore := counterNow(t, d.Reader, c.verdict), counterNow(t, d.Reader, c.answered)
			first, mtu, err := sendVolume(f.pod1, c.dst, pmtuVolume, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if first != jumboMTU {
				t.Fatalf("the pod's new socket to %s has path MTU %d, want %d (its veth's)", c.dst, first, jumboMTU)
			}
			if mtu != hopMTU {
				t.Errorf("the pod's socket to %s has path MTU %d after %d bytes, want %d (the hop's)", c.dst, mtu, pmtuVolume, hopMTU)
			}
			waitCounter(t, d.Reader, c.verdict, before+1)
			waitCounter(t, d.Reader, c.answered, answeredBefore+1)
		})
	}
}

// addHopTo puts farHost in a namespace of its own behind the vpc namespace, whose interface toward it has
// the hop's MTU (the far host's own is jumbo, so it advertises a jumbo MSS and only the hop can tell the
// pod). It returns the far host's namespace.
func (f *fabric) addHopTo(t *testing.T) ns.NetNS {
	t.Helper()
	far, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	t.Cleanup(func() { _ = far.Close(); _ = testutils.UnmountNS(far) })
	if err := f.vpc.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vpcfar", MTU: hopMTU}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(far.Fd()))}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("adding veth vpcfar: %w", err)
		}
		if _, err := linktest.Up("vpcfar", farGW.String()+"/24"); err != nil {
			return err
		}
		return sysctls(map[string]string{"net/ipv4/ip_forward": "1"})
	}); err != nil {
		t.Fatalf("building the hop: %v", err)
	}
	if err := far.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMTU(l, jumboMTU); err != nil {
			return err
		}
		if _, err := linktest.Up("eth0", farHost.String()+"/24"); err != nil {
			return err
		}
		if _, err := linktest.Up("lo", ""); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: farGW.AsSlice()})
	}); err != nil {
		t.Fatalf("building the far host: %v", err)
	}
	return far
}

// setJumbo gives every ENI and pod veth of the fabric, both ends, the jumbo MTU.
func (f *fabric) setJumbo(t *testing.T) {
	t.Helper()
	for _, side := range []struct {
		n     ns.NetNS
		links []string
	}{{f.node, []string{"eni1", "eni2", "host1", "host2"}}, {f.vpc, []string{"vpc1", "vpc2"}}, {f.pod1, []string{"eth0"}}, {f.pod2, []string{"eth0"}}} {
		if err := side.n.Do(func(ns.NetNS) error {
			for _, name := range side.links {
				l, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				if err := netlink.LinkSetMTU(l, jumboMTU); err != nil {
					return fmt.Errorf("setting the MTU of %s: %w", name, err)
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("setting jumbo MTUs: %v", err)
		}
	}
}

// serveByteCount reads every connection to at in netns n to its end and answers with the number of bytes
// read (8 bytes, big endian).
func serveByteCount(t *testing.T, n ns.NetNS, at netip.AddrPort) {
	t.Helper()
	serveTCP(t, n, at, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		got, _ := io.Copy(io.Discard, c)
		_, _ = c.Write(binary.BigEndian.AppendUint64(nil, uint64(got)))
	})
}

// sendVolume connects from netns n to dst, sends size bytes, waits for the count the far end read and
// returns the connected socket's path MTU (IP_MTU) as the kernel knew it before the first byte and after
// the count.
func sendVolume(n ns.NetNS, dst netip.AddrPort, size int, within time.Duration) (before, after int, err error) {
	var c *net.TCPConn
	if err := n.Do(func(ns.NetNS) error {
		conn, err := net.DialTimeout("tcp4", dst.String(), 5*time.Second)
		if err == nil {
			c = conn.(*net.TCPConn)
		}
		return err
	}); err != nil {
		return 0, 0, fmt.Errorf("connecting to %s: %w", dst, err)
	}
	defer c.Close()
	if before, err = pathMTU(c); err != nil {
		return 0, 0, err
	}
	_ = c.SetDeadline(time.Now().Add(within))
	chunk := make([]byte, 64<<10)
	for sent := 0; sent < size; {
		nw, err := c.Write(chunk[:min(len(chunk), size-sent)])
		sent += nw
		if err != nil {
			return 0, 0, fmt.Errorf("sending to %s (%d of %d bytes; a black hole stalls here): %w", dst, sent, size, err)
		}
	}
	if err := c.CloseWrite(); err != nil {
		return 0, 0, err
	}
	var count [8]byte
	if _, err := io.ReadFull(c, count[:]); err != nil {
		return 0, 0, fmt.Errorf("reading the count from %s: %w", dst, err)
	}
	if got := binary.BigEndian.Uint64(count[:]); got != uint64(size) {
		return 0, 0, fmt.Errorf("%s read %d bytes, want %d", dst, got, size)
	}
	after, err = pathMTU(c)
	return before, after, err
}

// pathMTU is a connected socket's path MTU as its route (and what ICMP taught it) says.
func pathMTU(c *net.TCPConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		mtu  int
		serr error
	)
	if err := raw.Control(func(fd uintptr) { mtu, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU) }); err != nil {
		return 0, err
	}
	return mtu, serr
}
