// Package e2e runs eniwire inside a real Kubernetes cluster on the simulated VPC (test/k8s/cluster): the
// kubelet, kube-proxy (iptables and nftables modes), CoreDNS and the control plane are built from the
// Kubernetes sources, and eniwire is installed from deploy/manifests with `kubectl apply -k`. The cases run
// in order against one cluster (bringing one up costs a minute); each prints one line, and the run ends
// with the table docs/testing.md carries.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// row is one case's line of the report.
type row struct {
	name, result, figure string
	seconds              float64
}

type report struct {
	mu    sync.Mutex
	rows  []row
	start time.Time
}

var results = &report{start: time.Now()}

// run runs one case as a subtest and records its line: what, pass or fail, and the figure it returns. A case
// that -run or -skip leaves out gets no line (t.Run reports it as passed without running it).
func (r *report) run(t *testing.T, name string, f func(t *testing.T) string) bool {
	var figure string
	ran := false
	start := time.Now()
	ok := t.Run(name, func(t *testing.T) { ran = true; figure = f(t) })
	if !ran {
		return ok
	}
	res := "pass"
	if !ok {
		res = "FAIL"
	}
	sec := time.Since(start).Seconds()
	fmt.Printf("k8s-e2e: %-58s %-4s %6.1fs  %s\n", name, res, sec, figure)
	r.mu.Lock()
	r.rows = append(r.rows, row{name, res, figure, sec})
	r.mu.Unlock()
	return ok
}

// table is the report as a Markdown table, with the total time.
func (r *report) table() string {
	var b strings.Builder
	b.WriteString("| case | result | seconds | figure |\n| --- | --- | --- | --- |\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s |\n", x.name, x.result, x.seconds, strings.ReplaceAll(x.figure, "|", "/"))
	}
	fmt.Fprintf(&b, "\nTotal: %s (cluster bring-up included).\n", time.Since(r.start).Round(time.Second))
	return b.String()
}

func requireMachine(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"containerd", "runc", "ctr", "crictl", "nsenter", "unshare", "iptables", "nft", "conntrack", "bpftool"} {
		testenv.RequireTool(t, tool)
	}
}

// upCluster brings up the test cluster for t, of the IP family IP_FAMILY names (ipv4, the default, ipv6 or
// dual), and removes it when t ends (kept with E2E_KEEP=1 on failure).
func upCluster(t *testing.T, ctx context.Context) *cluster.Cluster {
	t.Helper()
	start := time.Now()
	c, err := cluster.Up(ctx, cluster.Options{Name: fmt.Sprintf("ek%04x", os.Getpid()&0xffff), IPFamily: os.Getenv("IP_FAMILY"), Logf: func(f string, a ...any) {
		fmt.Printf("k8s-e2e: %s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(f, a...))
	}})
	if err != nil {
		t.Fatalf("bringing the cluster up: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, c)
			if os.Getenv("E2E_KEEP") == "1" {
				t.Logf("E2E_KEEP=1: cluster kept; KUBECONFIG=%s; remove with: sudo make k8s-clean", c.Kubeconfig)
				return
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("removing the cluster: %v", err)
		}
	})
	fmt.Printf("k8s-e2e: cluster up in %s\n", time.Since(start).Round(time.Second))
	return c
}

// dumpLogs prints the tail of every program's log, for a failed run.
func dumpLogs(t *testing.T, c *cluster.Cluster) {
	var procs []*cluster.Process
	if c.ControlPlane != nil {
		procs = append(procs, c.ControlPlane.Processes()...)
	}
	for _, n := range c.Nodes {
		procs = append(procs, n.Processes()...)
	}
	for _, p := range procs {
		t.Logf("== %s (%s), last lines:\n%s", p.Name, p.LogPath, p.Tail(15))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, _ := c.Kubectl(ctx, "get", "nodes,pods", "-A", "-o", "wide")
	t.Logf("== kubectl get nodes,pods -A -o wide\n%s", out)
	for _, n := range c.Nodes {
		if pod, err := c.AgentPod(ctx, n.Name); err == nil {
			out, _ := c.Kubectl(ctx, "logs", "-n", "kube-system", pod.Name, "--tail=30")
			t.Logf("== agent on %s\n%s", n.Name, out)
		}
	}
}

// TestKubernetesNode is the whole run: one cluster, the cases in order (an IPv6 cluster's are runIPv6's, a
// dual-stack cluster's runDual's).
func TestKubernetesNode(t *testing.T) {
	requireMachine(t)
	ctx := context.Background()
	c := upCluster(t, ctx)
	s := &suite{c: c, node1: c.Nodes[0], node2: c.Nodes[1]}

	if !results.run(t, "1. node NotReady until the agent is ready, then Ready; CoreDNS Running", s.readiness) {
		t.FailNow()
	}
	if c.Family.IsIPv6() {
		s.runIPv6(t)
		writeReport(t)
		return
	}
	if c.Family.IsDual() {
		s.runDual(t)
		writeReport(t)
		return
	}
	results.run(t, startupTaintCase, s.startupTaint)
	results.run(t, ipamReadyCase, s.ipamReadyFollowsTheSubnet)
	results.run(t, "2. Deployment of 30 pods: VPC addresses, books = EC2 = BPF map", s.deployment)
	results.run(t, fillNodeCase, s.fillNode)
	results.run(t, fullCauseCase, s.fullNodeCause)
	s.inEachProxyMode(t, func(mode string) {
		for _, sc := range s.serviceCases() {
			results.run(t, fmt.Sprintf("3. [%s] %s", mode, sc.name), sc.run)
		}
	})
	results.run(t, "4. probes pass; probed pods reachable from the VPC and node 2", s.probes)
	results.run(t, "4b. pod to the internet (SNAT), the VPC and its node; node to pod", s.podToOutside)
	results.run(t, "4c. path MTU: fragmentation-needed reaches a pod, directly and through a Service", s.pathMTU)
	results.run(t, "4d. traceroute from a pod shows the node", s.traceroute)
	results.run(t, "4e. a pod whose network namespace vanished without a DEL is released; the others are kept", s.vanishedNetns)
	results.run(t, imdsHopLimitCase, s.imdsHopLimit)
	results.run(t, fullNodeReadyCase, s.fullNodeStayedReady)
	results.run(t, "5a. DaemonSet rolling update to a second tag while a flow runs", s.rollingUpdate)
	results.run(t, "5b. agent pod deleted during a scale-up; scale to 0 and back", s.agentKilledDuringScaleUp)
	results.run(t, prometheusCase, s.prometheusScrape)
	for _, nc := range s.netpolCases() {
		results.run(t, nc.name, nc.run)
	}
	s.removeNetpol(t)
	results.run(t, "6. uninstall: the node holds nothing of eniwire", s.uninstall)
	results.run(t, "7. Helm chart (helm's own engine) installs a working eniwire", s.helm)
	results.run(t, "8. prefix delegation: 110 pods on an m5.large", s.prefixDelegation)
	results.run(t, customNetworkingCase, s.customNetworking)
	results.run(t, podSecurityGroupsCase, s.podSecurityGroups)
	results.run(t, burstPrefixCase, s.burstCase(true))
	results.run(t, burstSecondaryCase, s.burstCase(false))
	writeReport(t)
}

// writeReport prints the run's table and writes it to E2E_REPORT when that is set.
func writeReport(t *testing.T) {
	table := results.table()
	fmt.Println("\n" + table)
	if path := os.Getenv("E2E_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Errorf("writing the report: %v", err)
		}
	}
}

// suite holds the cluster and what the cases share.
type suite struct {
	c            *cluster.Cluster
	node1, node2 *cluster.Node
	// client1 and client2 are netexec pods on node 1 and node 2, the sources of pod traffic.
	client1, client2 string
	// svcs are made by the first Service case and kept for the next kube-proxy mode.
	svcs *svcs
	// full is node 2 filled to its max pods, from fillNode until fullNodeStayedReady.
	full *fullNode
	// taintedAtStart says which nodes carried the startup taint before eniwire was installed (case 1).
	taintedAtStart map[string]bool
	// np is what the NetworkPolicy cases share, from the first that runs until removeNetpol.
	np *netpolSetup
}
