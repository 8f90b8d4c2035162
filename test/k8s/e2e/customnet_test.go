package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// The pod subnet custom networking moves node 1's new pods into: PodSubnetsSeed's first, in the secondary
// VPC block 100.64.0.0/16.
const (
	podBlock       = "100.64.0.0/16"
	podSubnetCIDR  = "100.64.0.0/19"
	customReplicas = 10
	eniConfigLabel = "k8s.amazonaws.com/eniConfig"
)

// TestCustomNetworking runs the custom networking case alone on a cluster of its own, after the readiness
// case has installed eniwire: go test -run TestCustomNetworking ./e2e/ (under the machine's cluster lock).
// make e2e-k8s skips it: TestKubernetesNode runs the same case on its cluster.
func TestCustomNetworking(t *testing.T) {
	requireMachine(t)
	c := upCluster(t, context.Background())
	s := &suite{c: c, node1: c.Nodes[0], node2: c.Nodes[1]}
	if !results.run(t, "1. node NotReady until the agent is ready, then Ready; CoreDNS Running", s.readiness) {
		t.FailNow()
	}
	results.run(t, customNetworkingCase, s.customNetworking)
	fmt.Println("\n" + results.table())
}

const customNetworkingCase = "9. custom networking: an ENIConfig moves a node's new pods to 100.64.0.0/19"

// customNetworking gives the VPC the block 100.64.0.0/16 with a pod subnet in node 1's zone, creates the
// ENIConfig named after the zone for it, labels node 1 with k8s.amazonaws.com/eniConfig=<zone> and turns on
// AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG. A Deployment on node 1 then runs with addresses of the pod subnet, on
// ENIs EC2 lists in that subnet, and one of its pods reaches the VPC host as itself, a pod of the node's own
// subnet (on node 2, started before the switch) and the internet host through the node's SNAT.
func (s *suite) customNetworking(t *testing.T) string {
	ctx := context.Background()
	n := s.node1
	if err := s.c.InstallEniwire(ctx, "k8s-test"); err != nil {
		t.Fatal(err)
	}
	peer := startPrimaryPeer(t, s)
	podSubnet := addPodSubnet(t, s.c, n)
	zone := n.Instance.AZ
	applyENIConfig(t, s.c, zone, podSubnet)
	kubectl(t, s.c, "label", "node", n.Name, eniConfigLabel+"="+zone, "--overwrite")
	t.Cleanup(func() { _, _ = s.c.Kubectl(ctx, "label", "node", n.Name, eniConfigLabel+"-") })
	s.setAgentEnv(t, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true")
	if err := s.c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := waitAgentLog(ctx, s.c, n, `"applies":true,"choice":"ENIConfig `+zone+" ("); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	mustCreate(t, "customnet", s.c.Client.AppsV1().Deployments(ns).Create, deployment("customnet", n.Name, customReplicas))
	pods, err := waitPodsReady(ctx, s.c, ns, "app=customnet", customReplicas, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	subnet := netip.MustParsePrefix(podSubnetCIDR)
	onENIs := podSubnetENIAddrs(s.c, n, podSubnet)
	for _, p := range pods {
		addr, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !subnet.Contains(addr) {
			t.Errorf("pod %s has address %q, want one of the ENIConfig's subnet %s", p.Name, p.Status.PodIP, podSubnetCIDR)
		} else if !onENIs[p.Status.PodIP] {
			t.Errorf("pod %s's address %s is on no ENI of node %s in %s", p.Name, p.Status.PodIP, short(n.Name), podSubnet)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	client := pods[0].Status.PodIP
	inet, vpc := s.c.Fabric.Internet(), s.c.Fabric.VPCHost()
	whoami(t, inet.NetnsPath, ":18000")
	whoami(t, vpc.NetnsPath, ":18000")
	var figures []string
	for _, c := range []struct {
		what, host string
		port       int
		want       string
	}{
		{"VPC host (as itself)", vpc.IP.String(), 18000, client},
		{"a pod of the node's subnet", peer.ip, 8080, peer.name},
		{"internet (SNAT to the node)", inet.IP.String(), 18000, n.IP().String()},
	} {
		r, err := dialFrom(ctx, n, client, "http", c.host, c.port, tries)
		ok := 0
		for _, resp := range r.Responses {
			if resp == c.want {
				ok++
			}
		}
		if err != nil || ok != tries {
			t.Errorf("pod %s to %s: %d/%d seen as %s; responses %v; err %v %v; what the packets did:%s", client, c.what, ok, tries,
				c.want, first(r.Responses, 2), err, first(r.Errors, 2), diagnose(ctx, n, c.host))
		}
		figures = append(figures, fmt.Sprintf("%s %d/%d", c.what, ok, tries))
	}

	s.deleteWorkloads(t)
	s.setAgentEnv(t, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=false")
	return fmt.Sprintf("%s: %d pods Running in %.0fs with addresses of %s (%s); from one: %s",
		short(n.Name), len(pods), took.Seconds(), podSubnet, podSubnetCIDR, strings.Join(figures, ", "))
}

// kubectl runs kubectl against the cluster and fails t when it fails.
func kubectl(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

// setAgentEnv sets environment variables of the agent (KEY=VALUE) on the DaemonSet and waits until the
// rollout is done; a value it already has changes nothing.
func (s *suite) setAgentEnv(t *testing.T, env ...string) {
	t.Helper()
	kubectl(t, s.c, append([]string{"set", "env", "-n", "kube-system", "daemonset/eniwire", "-c", "agent"}, env...)...)
	kubectl(t, s.c, "rollout", "status", "-n", "kube-system", "daemonset/eniwire", "--timeout=3m")
}

// waitAgentLog waits until the log of n's agent holds want: the agent's own word on what it read from the
// Kubernetes API.
func waitAgentLog(ctx context.Context, c *cluster.Cluster, n *cluster.Node, want string) error {
	var last string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		pod, err := c.AgentPod(ctx, n.Name)
		if err != nil {
			last = err.Error()
			continue
		}
		out, err := c.Kubectl(ctx, "logs", "-n", "kube-system", pod.Name)
		if err == nil && strings.Contains(out, want) {
			return nil
		}
		last = out
	}
	lines := strings.Split(strings.TrimSpace(last), "\n")
	return fmt.Errorf("the agent on %s never logged %s; its last lines:\n%s", short(n.Name), want, strings.Join(lines[max(0, len(lines)-15):], "\n"))
}

type peerPod struct{ name, ip string }

// startPrimaryPeer runs a netexec pod on node 2 while custom networking is still off, so its address is of
// the nodes' subnet.
func startPrimaryPeer(t *testing.T, s *suite) peerPod {
	t.Helper()
	const name = "primary-peer"
	mustCreate(t, name, s.c.Client.CoreV1().Pods(ns).Create, pod(name, s.node2.Name, 0))
	pods, err := waitPodsReady(context.Background(), s.c, ns, "app="+name, 1, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !netip.MustParsePrefix(cluster.SubnetCIDR).Contains(netip.MustParseAddr(pods[0].Status.PodIP)) {
		t.Fatalf("pod %s has address %s, want one of the nodes' subnet %s", name, pods[0].Status.PodIP, cluster.SubnetCIDR)
	}
	return peerPod{name: name, ip: pods[0].Status.PodIP}
}

// addPodSubnet gives n's VPC the block 100.64.0.0/16 and a pod subnet in n's zone, once, and returns its id.
func addPodSubnet(t *testing.T, c *cluster.Cluster, n *cluster.Node) string {
	t.Helper()
	id := ec2sim.PodSubnetA
	st := c.Sim.Snapshot()
	if slices.ContainsFunc(st.Subnets, func(sn ec2sim.SubnetState) bool { return sn.ID == id }) {
		return id
	}
	if _, err := c.Sim.AddVPCCIDRBlock(n.Instance.VPCID, podBlock); err != nil {
		t.Fatal(err)
	}
	if err := c.Sim.AddSubnet(ec2sim.SubnetSpec{ID: id, VPCID: n.Instance.VPCID, CIDR: podSubnetCIDR, AZ: n.Instance.AZ}); err != nil {
		t.Fatal(err)
	}
	return id
}

// applyENIConfig waits for the ENIConfig CRD (installed with eniwire) and creates the ENIConfig name for subnet.
func applyENIConfig(t *testing.T, c *cluster.Cluster, name, subnet string) {
	t.Helper()
	kubectl(t, c, "wait", "--for=condition=Established", "--timeout=1m", "crd/eniconfigs.crd.k8s.amazonaws.com")
	path := filepath.Join(t.TempDir(), "eniconfig.yaml")
	doc := fmt.Sprintf("apiVersion: crd.k8s.amazonaws.com/v1alpha1\nkind: ENIConfig\nmetadata:\n  name: %s\nspec:\n  subnet: %s\n", name, subnet)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "apply", "-f", path)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = c.Kubectl(ctx, "delete", "eniconfig", name, "--ignore-not-found")
	})
}

// podSubnetENIAddrs are the private addresses of n's ENIs in subnet, as EC2 lists them.
func podSubnetENIAddrs(c *cluster.Cluster, n *cluster.Node, subnet string) map[string]bool {
	out := map[string]bool{}
	for _, e := range c.Sim.Snapshot().ENIs {
		if e.Attachment == nil || e.Attachment.InstanceID != n.Instance.ID || e.SubnetID != subnet {
			continue
		}
		for _, ip := range e.IPs {
			out[ip] = true
		}
	}
	return out
}
