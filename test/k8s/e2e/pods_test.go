package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

const webReplicas = 30

// deployment: 30 pods of a Deployment on node 1 run with VPC addresses that EC2 lists on ENIs of node 1
// (delete-on-termination set), and kubectl, eniwirectl and the BPF map agree on them. It also starts the
// workloads the later cases use: the client pods on both nodes and a Deployment on node 2.
func (s *suite) deployment(t *testing.T) string {
	ctx := context.Background()
	apps, core := s.c.Client.AppsV1().Deployments(ns), s.c.Client.CoreV1().Pods(ns)
	start := time.Now()
	mustCreate(t, "web", apps.Create, deployment("web", s.node1.Name, webReplicas))
	pods, err := waitPodsReady(ctx, s.c, ns, "app=web", webReplicas, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	mustCreate(t, "remote", apps.Create, deployment("remote", s.node2.Name, 2))
	mustCreate(t, "client1", core.Create, pod("client1", s.node1.Name, 0))
	mustCreate(t, "client2", core.Create, pod("client2", s.node2.Name, 0))
	for _, sel := range []string{"app=remote", "app=client1", "app=client2"} {
		n := 1
		if sel == "app=remote" {
			n = 2
		}
		if _, err := waitPodsReady(ctx, s.c, ns, sel, n, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"client1", "client2"} {
		p, err := core.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "client1" {
			s.client1 = p.Status.PodIP
		} else {
			s.client2 = p.Status.PodIP
		}
	}

	checkPodAddresses(t, s.c, s.node1, pods)
	enis, err := s.checkBooks(ctx)
	if err != nil {
		t.Error(err)
	}
	return fmt.Sprintf("30 pods Running in %.0fs on %s ENIs of %s; kubectl = eniwirectl = BPF map", took.Seconds(), enis, short(s.node1.Name))
}

// checkPodAddresses asserts that each pod's IP is a secondary IP, or an address of a /28 prefix, of an ENI EC2
// shows attached to the node with DeleteOnTermination, that no IP is used twice, and that `eniwirectl pods` and the BPF pod map hold
// exactly the node's pods with those addresses.
func checkPodAddresses(t *testing.T, c *cluster.Cluster, n *cluster.Node, pods []corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	ec2, err := podAddrsInEC2(c, n)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := map[string]string{} // IP -> namespace/name
	for _, p := range pods {
		if prev, dup := kubectl[p.Status.PodIP]; dup {
			t.Errorf("IP %s held by %s and %s/%s", p.Status.PodIP, prev, p.Namespace, p.Name)
		}
		kubectl[p.Status.PodIP] = p.Namespace + "/" + p.Name
		if _, ok := ec2[p.Status.PodIP]; !ok {
			t.Errorf("pod %s has %s, which EC2 does not list on a delete-on-termination ENI of %s (a secondary IP or in a /28 prefix)", p.Name, p.Status.PodIP, n.Instance.ID)
		}
	}
	held, err := assignments(ctx, c, n)
	if err != nil {
		t.Fatal(err)
	}
	agent := map[string]string{}
	for _, a := range held {
		agent[a.IP] = a.Pod.Namespace + "/" + a.Pod.Name
	}
	for ip, who := range kubectl {
		if agent[ip] != who {
			t.Errorf("kubectl: %s has %s; eniwirectl pods: %q", who, ip, agent[ip])
		}
	}
	bpf, err := bpfPodIPs(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for ip := range kubectl {
		if !bpf[ip] {
			t.Errorf("pod IP %s is not in the BPF pod map", ip)
		}
	}
	if len(agent) != len(bpf) {
		t.Errorf("eniwirectl pods lists %d pods, the BPF map %d", len(agent), len(bpf))
	}
}

// podAddrsInEC2 maps every address EC2 lists for pods on the node's delete-on-termination ENIs (secondary
// IPs and the addresses of /28 prefixes) to its ENI.
func podAddrsInEC2(c *cluster.Cluster, n *cluster.Node) (map[string]string, error) {
	ec2 := map[string]string{}
	for _, e := range c.Sim.Snapshot().ENIs {
		if e.Attachment == nil || e.Attachment.InstanceID != n.Instance.ID || !e.Attachment.DeleteOnTermination {
			continue
		}
		for _, ip := range e.IPs {
			if ip != e.PrimaryIP {
				ec2[ip] = e.ID
			}
		}
		for _, p := range e.Prefixes {
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				return nil, fmt.Errorf("EC2 lists prefix %q on %s: %w", p, e.ID, err)
			}
			for a := pfx.Addr(); pfx.Contains(a); a = a.Next() {
				ec2[a.String()] = e.ID
			}
		}
	}
	return ec2, nil
}

// bpfPodIPs reads the node's pinned pod map with bpftool, as an operator would, inside the node's mount
// namespace (where its bpffs is).
func bpfPodIPs(ctx context.Context, n *cluster.Node) (map[string]bool, error) {
	out, err := n.NS().Command(ctx, "bpftool", "-j", "map", "dump", "pinned", "/sys/fs/bpf/eniwire/v1/maps/pods").Output()
	if err != nil {
		return nil, fmt.Errorf("bpftool map dump: %w", err)
	}
	var entries []struct {
		Formatted struct {
			Key map[string]any `json:"key"`
		} `json:"formatted"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("decoding bpftool's dump: %w: %s", err, out)
	}
	ips := map[string]bool{}
	for _, e := range entries {
		raw, _ := e.Formatted.Key["addr"].([]any)
		if len(raw) != 16 {
			return nil, fmt.Errorf("pod map key %v has no 16-byte addr", e.Formatted.Key)
		}
		var b [16]byte
		for i, v := range raw {
			f, _ := v.(float64)
			b[i] = byte(f)
		}
		ips[netip.AddrFrom16(b).Unmap().String()] = true
	}
	return ips, nil
}

// checkBooks asserts, on every node, that the agent's books equal EC2's ENIs of the instance (nothing
// leaked, nothing lost) and returns the ENI counts.
func (s *suite) checkBooks(ctx context.Context) (string, error) {
	var counts, problems []string
	for _, n := range s.c.Nodes {
		b, err := s.c.Books(ctx, n)
		if err != nil {
			return "", err
		}
		if !b.Match() {
			problems = append(problems, fmt.Sprintf("%s: leaked %v, lost %v", short(n.Name), b.Leaked, b.Lost))
		}
		counts = append(counts, fmt.Sprint(len(b.Rows)))
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("books differ from EC2: %s", strings.Join(problems, "; "))
	}
	return strings.Join(counts, "+"), nil
}

// checkNoIPTwice asserts that no two running pods of the cluster share an address (hostNetwork pods
// share their node's and are left out).
func (s *suite) checkNoIPTwice(ctx context.Context) error {
	pods, err := s.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	seen := map[string][]string{}
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		seen[p.Status.PodIP] = append(seen[p.Status.PodIP], p.Name)
	}
	var dups []string
	for ip, names := range seen {
		if len(names) > 1 {
			sort.Strings(names)
			dups = append(dups, ip+": "+strings.Join(names, ", "))
		}
	}
	if len(dups) > 0 {
		return fmt.Errorf("IPs held twice: %s", strings.Join(dups, "; "))
	}
	return nil
}
