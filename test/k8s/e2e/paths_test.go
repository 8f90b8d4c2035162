package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// whoami serves, in the network namespace at nsPath, the address each client is seen as.
func whoami(t *testing.T, nsPath, addr string) {
	t.Helper()
	l, err := vpcfabric.Listen(nsPath, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprint(w, host)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// podToOutside: a pod reaches the internet host translated to its node's address (SNAT) and gets the
// answers; it reaches the VPC host and its own node as itself; the node reaches the pod.
func (s *suite) podToOutside(t *testing.T) string {
	inet, vpc := s.c.Fabric.Internet(), s.c.Fabric.VPCHost()
	whoami(t, inet.NetnsPath, ":18000")
	whoami(t, vpc.NetnsPath, ":18000")
	whoami(t, s.node1.Netns.NetnsPath, s.node1.IP().String()+":18000")
	return s.client1SeenAs(t, []seenAs{
		{"internet (SNAT to the node)", inet.IP.String(), s.node1.IP().String()},
		{"VPC host (as itself)", vpc.IP.String(), s.client1},
		{"its node (as itself)", s.node1.IP().String(), s.client1},
	})
}

// seenAs is a whoami host a pod dials, and the address it must be seen as.
type seenAs struct {
	what, host, want string
}

// client1SeenAs has client1 (on node 1) fetch each whoami host's port 18000 `tries` times and requires it
// to be seen as the address wanted; then node 1 fetches from client1.
func (s *suite) client1SeenAs(t *testing.T, hosts []seenAs) string {
	ctx := context.Background()
	var figures []string
	for _, c := range hosts {
		r, err := dialFrom(ctx, s.node1, s.client1, "http", c.host, 18000, tries)
		ok := 0
		for _, resp := range r.Responses {
			if resp == c.want {
				ok++
			}
		}
		if err != nil || ok != tries {
			t.Errorf("pod to %s: %d/%d seen as %s; responses %v; err %v %v; what the packets did:%s", c.what, ok, tries, c.want,
				first(r.Responses, 2), err, first(r.Errors, 2), diagnose(ctx, s.node1, c.host))
		}
		figures = append(figures, fmt.Sprintf("%s %d/%d", c.what, ok, tries))
	}
	ok := 0
	for range tries {
		if resp, err := get(ctx, s.node1.Netns.NetnsPath, "http://"+net.JoinHostPort(s.client1, "8080")+"/hostname"); err == nil && resp == "client1" {
			ok++
		}
	}
	if ok != tries {
		t.Errorf("node to pod: %d/%d", ok, tries)
	}
	return strings.Join(figures, ", ") + fmt.Sprintf("; node to pod %d/%d", ok, tries)
}

// pathMTU puts a 1500-byte hop between the nodes and the VPC host (whose own link stays at 9001, so it
// advertises a jumbo MSS): a pod's 6,000-byte requests meet the hop, and the router's fragmentation-needed must
// reach the pod's socket, directly and, translated by the host, through a Service whose endpoint is the VPC
// host; the requests then get through.
func (s *suite) pathMTU(t *testing.T) string {
	ctx := context.Background()
	vpc := s.c.Fabric.VPCHost()
	whoami(t, vpc.NetnsPath, ":18000")
	svc := mustCreate(t, "Service vpchost", s.c.Client.CoreV1().Services(ns).Create, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vpchost", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	})
	mustCreate(t, "EndpointSlice vpchost", s.c.Client.DiscoveryV1().EndpointSlices(ns).Create, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "vpchost", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "vpchost"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{vpc.IP.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](18000), Protocol: ptr.To(corev1.ProtocolTCP)}},
	})
	time.Sleep(3 * time.Second) // kube-proxy's next sync
	if err := s.c.Fabric.SetVPCHostHopMTU(1500); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.c.Fabric.SetVPCHostHopMTU(9001); err != nil {
			t.Error(err)
		}
	}()
	fragFailsBefore, err := routerFragFails(s.c)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("p", 6000)
	var figures []string
	for _, c := range []struct {
		what, host string
		port       int
	}{
		{"directly", vpc.IP.String(), 18000},
		{"through a Service", svc.Spec.ClusterIP, 80},
	} {
		r, err := dialRequest(ctx, s.node1, s.client1, "http", c.host, c.port, 3, big)
		ok := 0
		for _, resp := range r.Responses {
			if resp == s.client1 {
				ok++
			}
		}
		if err != nil || ok != 3 {
			t.Errorf("6,000-byte requests %s across a 1500-byte hop: %d/3 got through; err %v; errors %v; what the packets did:%s", c.what, ok, err,
				first(r.Errors, 1), diagnose(ctx, s.node1, vpc.IP.String()))
		}
		figures = append(figures, fmt.Sprintf("%s %d/3", c.what, ok))
	}
	fragFailsAfter, err := routerFragFails(s.c)
	if err != nil {
		t.Fatal(err)
	}
	// Each path (direct, Service) learns the smaller MTU once: at least two packets were too big.
	if fragFailsAfter-fragFailsBefore < 2 {
		t.Errorf("the router refused %d too-big packets: the requests never met the 1500-byte hop", fragFailsAfter-fragFailsBefore)
	}
	return fmt.Sprintf("6,000-byte requests from a pod across a 1500-byte hop: %s; the router answered %d too-big packets with fragmentation-needed",
		strings.Join(figures, ", "), fragFailsAfter-fragFailsBefore)
}

// routerFragFails is the VPC router's count of packets it could not forward for their size (IP FragFails:
// with DF set, each was answered with fragmentation-needed).
func routerFragFails(c *cluster.Cluster) (int, error) {
	_, path := c.Fabric.Router()
	var n int
	err := vpcfabric.Do(path, func() error {
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if len(names) == len(values) && names[0] == "Ip:" {
				for j, name := range names {
					if name == "FragFails" {
						_, err := fmt.Sscan(values[j], &n)
						return err
					}
				}
			}
		}
		return fmt.Errorf("no Ip FragFails in /proc/net/snmp")
	})
	return n, err
}

// traceroute sends an ICMP echo with TTL 1 from inside a pod towards the VPC host: the first hop, its node,
// must answer time exceeded.
func (s *suite) traceroute(t *testing.T) string {
	ctx := context.Background()
	nsPath, err := podNetns(ctx, s.node1, ns, "client1")
	if err != nil {
		t.Fatal(err)
	}
	var from netip.Addr
	err = vpcfabric.Do(nsPath, func() error {
		c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.IPv4PacketConn().SetTTL(1); err != nil {
			return err
		}
		echo, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: 1, Data: []byte("eniwire")}}).Marshal(nil)
		if _, err := c.WriteTo(echo, &net.IPAddr{IP: s.c.Fabric.VPCHost().IP.AsSlice()}); err != nil {
			return err
		}
		buf := make([]byte, 1500)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			_ = c.SetReadDeadline(deadline)
			n, peer, err := c.ReadFrom(buf)
			if err != nil {
				return err
			}
			if m, err := icmp.ParseMessage(1, buf[:n]); err == nil && m.Type == ipv4.ICMPTypeTimeExceeded {
				from, _ = netip.AddrFromSlice(peer.(*net.IPAddr).IP.To4())
				return nil
			}
		}
		return fmt.Errorf("no time exceeded")
	})
	if err != nil {
		t.Fatalf("TTL 1 from a pod: %v; what the packets did:%s", err, diagnose(ctx, s.node1, s.client1))
	}
	addrs, err := nodeAddrs(s.node1)
	if err != nil {
		t.Fatal(err)
	}
	if !addrs[from] {
		t.Errorf("time exceeded came from %s, not from an address of the node (%v)", from, addrs)
	}
	return fmt.Sprintf("hop 1 is the node (%s)", from)
}

// podNetns is the network namespace of the pod's sandbox, as /proc/<pid>/ns/net (the runtime's own netns
// path lives in the node's mount namespace).
func podNetns(ctx context.Context, n *cluster.Node, namespace, pod string) (string, error) {
	id, err := n.Crictl(ctx, "pods", "--name", pod, "--namespace", namespace, "--state", "ready", "-q")
	if err != nil {
		return "", err
	}
	id = strings.TrimSpace(strings.SplitN(id, "\n", 2)[0])
	out, err := n.Crictl(ctx, "inspectp", id)
	if err != nil {
		return "", err
	}
	var insp struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &insp); err != nil || insp.Info.Pid == 0 {
		return "", fmt.Errorf("no pid in crictl inspectp %s: %v", id, err)
	}
	return fmt.Sprintf("/proc/%d/ns/net", insp.Info.Pid), nil
}

// nodeAddrs are the IPv4 addresses on the node's links.
func nodeAddrs(n *cluster.Node) (map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	err := vpcfabric.Do(n.Netns.NetnsPath, func() error {
		list, err := netlink.AddrList(nil, netlink.FAMILY_V4)
		for _, a := range list {
			if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
				out[ip] = true
			}
		}
		return err
	})
	return out, err
}
