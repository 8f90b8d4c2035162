package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

const netpolFirstPacketCase = "11b. NetworkPolicy: a pod started under a deny policy gets none of a denied peer's packets sent to its address before it existed"

// discardPort is where the denied peer sends: nothing listens there in the new pod, so each datagram that
// reaches the pod's stack counts once in its Udp NoPorts, whatever the pod runs.
const discardPort = 9

// spray sends UDP datagrams to discardPort of every address, round after round, from a socket inside a
// pod's network namespace, until stopped; it counts what it sent to each address.
type spray struct {
	sent map[string]*atomic.Int64
	stop chan struct{}
	done sync.WaitGroup
}

func startSpray(t *testing.T, netns string, addrs []string) *spray {
	t.Helper()
	var conn *net.UDPConn
	if err := vpcfabric.Do(netns, func() error {
		var err error
		conn, err = net.ListenUDP("udp4", nil)
		return err
	}); err != nil {
		t.Fatalf("opening the sender's socket: %v", err)
	}
	sp := &spray{sent: map[string]*atomic.Int64{}, stop: make(chan struct{})}
	dsts := make([]*net.UDPAddr, len(addrs))
	for i, a := range addrs {
		sp.sent[a] = &atomic.Int64{}
		dsts[i] = &net.UDPAddr{IP: net.ParseIP(a), Port: discardPort}
	}
	sp.done.Add(1)
	go func() {
		defer sp.done.Done()
		defer conn.Close()
		for {
			for i, d := range dsts {
				if _, err := conn.WriteToUDP([]byte("before you existed"), d); err == nil {
					sp.sent[addrs[i]].Add(1)
				}
			}
			select {
			case <-sp.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return sp
}

func (sp *spray) finish() {
	close(sp.stop)
	sp.done.Wait()
}

// udpCounters reads the Udp line of /proc/net/snmp of the network namespace at nsPath (/proc/<pid>/ns/net).
func udpCounters(nsPath string) (map[string]int64, error) {
	b, err := os.ReadFile(strings.TrimSuffix(nsPath, "ns/net") + "net/snmp")
	if err != nil {
		return nil, err
	}
	var names, values []string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Udp: "); ok {
			if names == nil {
				names = strings.Fields(rest)
			} else {
				values = strings.Fields(rest)
			}
		}
	}
	if len(names) == 0 || len(names) != len(values) {
		return nil, fmt.Errorf("no Udp counters in %s", nsPath)
	}
	out := map[string]int64{}
	for i, n := range names {
		v, err := strconv.ParseInt(values[i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("Udp %s: %w", n, err)
		}
		out[n] = v
	}
	return out, nil
}

// freePodAddrs are the addresses EC2 lists for pods on the node that no pod of the cluster holds: where the
// node's next pod will be.
func (s *suite) freePodAddrs(ctx context.Context, t *testing.T) []string {
	t.Helper()
	inEC2, err := podAddrsInEC2(s.c, s.node2)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := s.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		delete(inEC2, p.Status.PodIP)
	}
	var free []string
	for a := range inEC2 {
		free = append(free, a)
	}
	sort.Strings(free)
	if len(free) == 0 {
		t.Fatalf("node 2 has no free pod address in EC2")
	}
	return free
}

// netpolFirstPacket: np-other's client sends to every free pod address of node 2, 200 datagrams a second
// each, from before a pod of np-server (isolated by default-deny) is created there until after it is Ready:
// the pod's stack must have received none of them. Then a policy allowing np-other to the port shows that the
// same datagrams do arrive once allowed (the sender aimed at the pod's address, the counter counts them).
func (s *suite) netpolFirstPacket(t *testing.T) string {
	np := s.netpolSetupOnce(t)
	ctx := context.Background()
	s.createPolicy(t, serverPolicies()[0])
	free := s.freePodAddrs(ctx, t)
	sp := startSpray(t, np.otherNetns, free)
	time.Sleep(time.Second)
	start := time.Now()
	mustCreate(t, "np-server/fresh", s.c.Client.CoreV1().Pods(npServer).Create, podIn(npServer, "fresh", s.node2.Name))
	pods, err := waitPodsReady(ctx, s.c, npServer, "app=fresh", 1, 2*time.Minute)
	if err != nil {
		sp.finish()
		t.Fatal(err)
	}
	ready := time.Since(start)
	time.Sleep(2 * time.Second)
	sp.finish()
	ip := pods[0].Status.PodIP
	sent, aimed := sp.sent[ip]
	if !aimed {
		t.Fatalf("the pod got %s, not one of the %d free addresses the peer sent to (%s)", ip, len(free), strings.Join(free, " "))
	}
	nsPath, err := podNetns(ctx, s.node2, npServer, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	before, err := udpCounters(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	if before["NoPorts"] != 0 || before["InDatagrams"] != 0 {
		t.Errorf("the pod's stack received datagrams under its deny policy: Udp NoPorts %d, InDatagrams %d (the peer sent %d to %s)%s",
			before["NoPorts"], before["InDatagrams"], sent.Load(), ip, diagnose(ctx, s.node2, ip))
	}

	// The control: allowed, the same sender's datagrams reach the pod.
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-np-other-discard", Namespace: npServer},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "fresh"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{inNamespace(npOther)},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(discardPort))}}}},
		}}
	s.createPolicy(t, allow)
	defer s.deletePolicy(t, npServer, allow.Name)
	allowedAt := time.Now()
	control := startSpray(t, np.otherNetns, []string{ip})
	var after map[string]int64
	err = waitFor(enforceWithin, func() error {
		var err error
		if after, err = udpCounters(nsPath); err != nil {
			return err
		}
		if after["NoPorts"] <= before["NoPorts"] {
			return fmt.Errorf("Udp NoPorts still %d", after["NoPorts"])
		}
		return nil
	})
	delivered := time.Since(allowedAt)
	control.finish()
	if err != nil {
		t.Errorf("control: %s after allowing np-other to UDP %d, the pod still receives nothing: %v", enforceWithin, discardPort, err)
	}
	return fmt.Sprintf("%d datagrams sent to %s (one of %d free addresses) from before the pod existed until 2s after Ready (%.1fs); delivered: %d; allowed, delivered %.1fs later (NoPorts %d)",
		sent.Load(), ip, len(free), ready.Seconds(), before["NoPorts"], delivered.Seconds(), after["NoPorts"])
}
