// Command k8snode brings up the test cluster (a real Kubernetes control plane and nodes on the simulated
// VPC, eniwire installed from deploy/manifests) and leaves it running for a person until Ctrl-C, which
// removes everything. `-clean` removes what a killed run left.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

const prefix = "ek"

func main() {
	clean := flag.Bool("clean", false, "remove what a killed run left (processes, network namespaces, cgroups, scratch dirs) and exit")
	nodes := flag.String("nodes", "m5.xlarge,m5.large", "instance types of the nodes; the first runs the control plane")
	proxyMode := flag.String("proxy-mode", "iptables", "kube-proxy's mode: iptables or nftables")
	ipFamily := flag.String("ip-family", cluster.IPv4, "the cluster's IP family: ipv4, ipv6 (single-stack: IPv6 node IPs, Services and pods, the agent's ENABLE_IPv6) or dual (both families' node IPs, Service ranges and pod addresses, the agent's ENABLE_IPv4 and ENABLE_IPv6)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "k8snode: needs root (network and mount namespaces, BPF, cgroups); run: sudo make k8s")
		os.Exit(1)
	}
	if *clean {
		found, err := cluster.Cleanup(prefix, os.TempDir())
		for _, f := range found {
			fmt.Println("k8snode:", f)
		}
		if len(found) == 0 {
			fmt.Println("k8snode: nothing left to clean")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "k8snode:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, strings.Split(*nodes, ","), *proxyMode, *ipFamily); err != nil {
		fmt.Fprintln(os.Stderr, "k8snode:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, nodeTypes []string, proxyMode, ipFamily string) error {
	logf := func(format string, args ...any) {
		fmt.Printf("k8snode: %s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	start := time.Now()
	c, err := cluster.Up(ctx, cluster.Options{Name: fmt.Sprintf("%s%04x", prefix, os.Getpid()&0xffff), NodeTypes: nodeTypes, ProxyMode: proxyMode, IPFamily: ipFamily, Logf: logf})
	if err != nil {
		return err
	}
	defer func() {
		logf("removing the cluster")
		if err := c.Close(); err != nil {
			logf("clean-up: %v", err)
		}
	}()
	logf("installing eniwire: kubectl apply -k (deploy/manifests with the test overlay)")
	if err := c.InstallEniwire(ctx, "k8s-test"); err != nil {
		return err
	}
	if err := c.WaitNodesReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	logf("all nodes Ready, %s after the start", time.Since(start).Round(time.Second))
	out, _ := c.Kubectl(ctx, "get", "nodes,pods", "-A", "-o", "wide")
	fmt.Println(out)
	fmt.Printf(`The cluster runs until Ctrl-C. In another shell:
  export KUBECONFIG=%s
  kubectl get nodes,pods -A -o wide        (or: %s kubectl ...)
  ip netns list | grep %s                  (the nodes' network namespaces)
Logs: %s
`, c.Kubeconfig, c.Bins.Kube, c.Name, c.Dir)
	<-ctx.Done()
	return nil
}
