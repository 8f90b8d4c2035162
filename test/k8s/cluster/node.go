package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/eniwire/eniwire/controller/nodeready"
	"github.com/eniwire/eniwire/test/cri"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// Node is one Kubernetes node on one simulated EC2 instance: its network namespace from the fabric, a mount
// namespace of its own (see nodePaths), containerd with the CRI plugin, the kubelet and kube-proxy, all
// sharing that network namespace as they share a real instance's network.
type Node struct {
	Name     string // the Kubernetes node name, EC2's private DNS name
	Instance ec2sim.Instance
	Netns    vpcfabric.Node
	Dir      string
	Mount    *MountNS
	// Cgroup is the node's cgroup root (kubelet's cgroupRoot): "eniwire-<cluster>-<node>", one per node, so
	// kubelets on one machine do not share /kubepods and Cleanup finds what a killed run left.
	Cgroup string
	// IPv6 is the primary ENI's IPv6 address in an IPv6 or dual-stack cluster (giveIPv6), invalid in an IPv4 one.
	IPv6 netip.Addr

	containerd, kubelet, proxy *Process
	kube                       string
	family                     Family
}

// NS is where the node's programs run.
func (n *Node) NS() Namespaces {
	return Namespaces{NetnsPath: n.Netns.NetnsPath, MountPID: n.Mount.PID()}
}

// IP is the node's VPC address in the cluster's family (its primary ENI's): its kubelet's node IP, a
// dual-stack cluster's IPv4.
func (n *Node) IP() net.IP {
	if n.IPv6.IsValid() && n.family.IsIPv6() {
		return n.IPv6.AsSlice()
	}
	return net.ParseIP(n.Instance.PrimaryIP)
}

// nodeIPs is kubelet's --node-ip: IP, and a dual-stack cluster's IPv6 after it.
func (n *Node) nodeIPs() string {
	if n.family.IsDual() {
		return n.IP().String() + "," + n.IPv6.String()
	}
	return n.IP().String()
}

// podRange is where pods take their addresses, kube-proxy's clusterCIDR: the VPC's IPv4 block, its IPv6
// block in an IPv6 cluster, or both in a dual-stack one.
func (n *Node) podRange() string {
	switch {
	case n.family.IsIPv6():
		return n.family.VPCBlock
	case n.family.IsDual():
		return n.Instance.VPCCIDR + "," + n.family.VPCBlock
	}
	return n.Instance.VPCCIDR
}

// ContainerdSocket is the CRI endpoint of the node's containerd.
func (n *Node) ContainerdSocket() string {
	return filepath.Join(n.Dir, "containerd", "containerd.sock")
}

// startContainerd runs the node's containerd and waits for its API.
func (n *Node) startContainerd(ctx context.Context) error {
	dir := filepath.Join(n.Dir, "containerd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, cri.ContainerdConfig(dir, PauseImage, "/opt/cni/bin", "/etc/cni/net.d"), 0o644); err != nil {
		return err
	}
	p, err := Start(n.Dir, "containerd", n.NS(), nil, "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	n.containerd = p
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return waitFor(wctx, "containerd on "+n.Name, p, func() error {
		_, err := n.Ctr(ctx, "version")
		return err
	})
}

// Ctr runs ctr against the node's containerd, in the CRI's namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	return output(n.NS().Command(ctx, append([]string{"ctr", "--address", n.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...))
}

// Crictl runs crictl against the node's CRI.
func (n *Node) Crictl(ctx context.Context, args ...string) (string, error) {
	return output(n.NS().Command(ctx, append([]string{"crictl", "--runtime-endpoint", "unix://" + n.ContainerdSocket(), "--timeout", "30s"}, args...)...))
}

// output runs cmd and returns its standard output; its standard error goes into the error only.
func output(cmd *exec.Cmd) (string, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)), strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%[1]s
cgroupDriver: cgroupfs
cgroupRoot: /%[2]s
failSwapOn: false
# Lowering a process's oom_score_adj needs CAP_SYS_RESOURCE, which this machine withholds.
oomScoreAdj: 0
address: "%[3]s"
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
clusterDNS: ["%[4]s"]
clusterDomain: %[5]s
resolvConf: %[6]s
maxPods: %[7]d
podLogsDir: %[8]s
staticPodPath: %[9]s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[10]s}
authorization:
  mode: Webhook
`

// startKubelet writes the node's kubelet configuration and kubeconfig and starts it. maxPods is what
// eniwire says the instance type holds.
func (n *Node) startKubelet(pki *PKI, server string, maxPods int) error {
	dir := filepath.Join(n.Dir, "kubelet")
	for _, d := range []string{dir, filepath.Join(dir, "manifests")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	kubeconfig, err := pki.Kubeconfig("kubelet-"+n.Name, "system:node:"+n.Name, []string{"system:nodes"}, server)
	if err != nil {
		return err
	}
	resolv := filepath.Join(dir, "resolv.conf")
	// The VPC has no resolver in the simulation; pods with dnsPolicy Default get this one.
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, kubeletConfig, n.ContainerdSocket(), n.Cgroup, n.IP(),
		n.family.DNSServiceIP, ClusterDomain, resolv, maxPods, "/var/log/pods", filepath.Join(dir, "manifests"),
		pki.Path("ca.crt")), 0o644); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.Cgroup); err != nil {
		return err
	}
	n.kubelet, err = Start(n.Dir, "kubelet", n.NS(), nil, n.kube, "kubelet",
		"--config="+cfg, "--kubeconfig="+kubeconfig, "--root-dir=/var/lib/kubelet",
		"--hostname-override="+n.Name, "--node-ip="+n.nodeIPs(),
		"--provider-id=aws:///"+n.Instance.AZ+"/"+n.Instance.ID,
		"--node-labels=topology.kubernetes.io/zone="+n.Instance.AZ+",node.kubernetes.io/instance-type="+n.Instance.Type,
		// As deploy/README.md asks: no pod but the agent's until the agent removes it.
		"--register-with-taints="+nodeready.TaintKey+"=true:NoSchedule",
	)
	return err
}

// makeCgroupRoot makes /<name> in every cgroup v1 hierarchy (kubelet refuses a cgroupRoot that is missing).
func makeCgroupRoot(name string) error {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return fmt.Errorf("reading /sys/fs/cgroup: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join("/sys/fs/cgroup", e.Name(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("making the cgroup %s/%s: %w", e.Name(), name, err)
		}
		// A new cpuset cgroup starts with no CPUs and no memory nodes: give it the root's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", e.Name(), f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("setting %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the node's cgroups, deepest first (only empty cgroups can go).
func removeCgroupRoot(name string) {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		root := filepath.Join("/sys/fs/cgroup", e.Name(), name)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
mode: %[2]s
hostnameOverride: %[3]s
bindAddress: "%[4]s"
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Pods have VPC addresses: the VPC is the cluster's pod range.
clusterCIDR: "%[5]s"
conntrack:
  maxPerCore: 0
`

// StartProxy starts kube-proxy in mode (iptables or nftables) on the node, first cleaning up whatever rules
// another mode left.
func (n *Node) StartProxy(ctx context.Context, pki *PKI, server, mode string) error {
	if n.proxy != nil {
		_ = n.proxy.Stop(10 * time.Second)
		if out, err := output(n.NS().Command(ctx, n.kube, "proxy", "--cleanup")); err != nil {
			return fmt.Errorf("cleaning up kube-proxy's rules: %w: %s", err, out)
		}
	}
	kubeconfig, err := pki.Kubeconfig("kube-proxy-"+n.Name, "system:kube-proxy", []string{"system:node-proxier"}, server)
	if err != nil {
		return err
	}
	cfg := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, kubeProxyConfig, kubeconfig, mode, n.Name, n.IP(), n.podRange()), 0o644); err != nil {
		return err
	}
	n.proxy, err = Start(n.Dir, "kube-proxy", n.NS(), nil, n.kube, "proxy", "--config="+cfg)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := n.Netns.HTTPClient()
	return waitFor(wctx, "kube-proxy ("+mode+") on "+n.Name, n.proxy, func() error {
		resp, err := client.Get("http://127.0.0.1:10256/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	})
}

// Stop stops kube-proxy, the kubelet, every pod sandbox and containerd, and the mount namespace.
func (n *Node) Stop(ctx context.Context) {
	if n.proxy != nil {
		_ = n.proxy.Stop(10 * time.Second)
	}
	if n.kubelet != nil {
		_ = n.kubelet.Stop(10 * time.Second)
	}
	if n.containerd != nil && n.containerd.Running() {
		_, _ = n.Crictl(ctx, "rmp", "--all", "--force")
		_ = n.containerd.Stop(15 * time.Second)
	}
	if n.Mount != nil {
		_ = n.Mount.Close()
	}
	removeCgroupRoot(n.Cgroup)
}

// Processes are the node's programs, for logs.
func (n *Node) Processes() []*Process {
	var ps []*Process
	for _, p := range []*Process{n.containerd, n.kubelet, n.proxy} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}
