// Package cluster runs a real Kubernetes cluster on the simulated VPC: test/ec2sim and test/vpcfabric make
// the instances and their network, the control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) runs in the first node's network namespace, and every node runs containerd, the kubelet
// and kube-proxy, all built from the Kubernetes sources (cmd/kube). eniwire is installed into it as users
// install it, from deploy/ (InstallEniwire).
//
// Everything a cluster makes is named after Options.Name (network namespaces "<name>-...", the scratch dir
// "<tmp>/<name>", cgroups "/eniwire-ip-...") so Cleanup removes what a killed run left.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// Options shape a cluster.
type Options struct {
	// Name prefixes everything the cluster makes (default "ek<random>"); keep it short.
	Name string
	// TmpDir holds the scratch dir (default os.TempDir()).
	TmpDir string
	// NodeTypes are the instance types of the nodes; the first node also runs the control plane
	// (default m5.xlarge, m5.large).
	NodeTypes []string
	// ProxyMode is kube-proxy's first mode (default iptables).
	ProxyMode string
	// IPFamily is the cluster's IP family, IPv4 (default) or IPv6 single-stack (see Family).
	IPFamily string
	// Logf receives a line per step.
	Logf func(format string, args ...any)
}

const (
	vpcID      = "vpc-0e5e0000000000001"
	subnetID   = "subnet-0e5e000000000001"
	VPCCIDR    = "10.0.0.0/16"
	SubnetCIDR = "10.0.0.0/20"
)

// Cluster is a running cluster.
type Cluster struct {
	Name, Dir, RepoRoot string
	Bins                Binaries
	Sim                 *ec2sim.Sim
	Fabric              *vpcfabric.Fabric
	PKI                 *PKI
	ControlPlane        *ControlPlane
	Nodes               []*Node
	// Kubeconfig is the admin's kubeconfig, pointing at a loopback port of the machine.
	Kubeconfig string
	Client     kubernetes.Interface
	ProxyMode  string
	// Family is the cluster's IP family and its address plan.
	Family Family

	images    []string
	apiProxy  *apiProxy
	cancelFab context.CancelFunc
	logf      func(string, ...any)
}

// Up builds what is missing and starts a cluster whose nodes are registered but NotReady: no network
// plugin runs yet. On error, everything made so far is removed.
func Up(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("ek%04x", rand.N(0x10000))
	}
	if opts.TmpDir == "" {
		opts.TmpDir = os.TempDir()
	}
	if len(opts.NodeTypes) == 0 {
		opts.NodeTypes = []string{"m5.xlarge", "m5.large"}
	}
	if opts.ProxyMode == "" {
		opts.ProxyMode = "iptables"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	family, err := FamilyOf(opts.IPFamily)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: opts.Name, Dir: filepath.Join(opts.TmpDir, opts.Name), ProxyMode: opts.ProxyMode, Family: family, logf: opts.Logf}
	if c.RepoRoot, err = RepoRoot(); err != nil {
		return nil, err
	}
	start := time.Now()
	if c.Bins, err = Build(ctx, c.RepoRoot, CacheDir(), opts.Logf); err != nil {
		return nil, err
	}
	opts.Logf("binaries ready in %s", time.Since(start).Round(time.Second))
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the scratch dir: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	upStart := time.Now()
	if c.images, err = writeImages(c.RepoRoot, c.Dir, c.Bins); err != nil {
		return nil, err
	}

	if err := c.startVPC(); err != nil {
		return nil, err
	}
	for _, typ := range opts.NodeTypes {
		n, err := c.newInstance(ctx, typ)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}

	if c.PKI, err = NewPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return nil, err
	}
	first := c.Nodes[0]
	opts.Logf("starting the control plane on %s", first.Name)
	if c.ControlPlane, err = StartControlPlane(ctx, c.Dir, c.Bins.Kube, c.PKI, Namespaces{NetnsPath: first.Netns.NetnsPath}, first.IP(), family); err != nil {
		return nil, err
	}
	if c.apiProxy, err = startAPIProxy(first.Netns.NetnsPath, net.JoinHostPort(first.IP().String(), fmt.Sprint(apiPort))); err != nil {
		return nil, err
	}
	if c.Kubeconfig, err = c.PKI.Kubeconfig("admin", "eniwire-test-admin", []string{"system:masters"}, "https://"+c.apiProxy.Addr()); err != nil {
		return nil, err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := c.startNode(ctx, n); err != nil {
			return nil, fmt.Errorf("starting node %s: %w", n.Name, err)
		}
	}
	if err := c.waitNodesRegistered(ctx); err != nil {
		return nil, err
	}
	if err := c.deployCoreDNS(ctx); err != nil {
		return nil, err
	}
	opts.Logf("cluster up in %s (%s): %d nodes registered, no network plugin yet", time.Since(upStart).Round(time.Second), family.Name, len(c.Nodes))
	return c, nil
}

// startVPC makes the simulated VPC (its IPv6 blocks too in an IPv6 or dual-stack cluster) and starts its fabric.
func (c *Cluster) startVPC() error {
	cfg := ec2sim.DefaultConfig()
	c.Sim = ec2sim.New(cfg)
	if err := c.Sim.AddVPC(vpcID, VPCCIDR); err != nil {
		return err
	}
	if c.Family.HasIPv6() {
		if _, err := c.Sim.AddVPCIPv6Block(vpcID, c.Family.VPCBlock); err != nil {
			return err
		}
	}
	if err := c.Sim.AddSubnet(ec2sim.SubnetSpec{ID: subnetID, VPCID: vpcID, CIDR: SubnetCIDR, AZ: cfg.Region + "a", IPv6CIDR: c.Family.SubnetBlock}); err != nil {
		return err
	}
	fabCtx, cancel := context.WithCancel(context.Background())
	c.cancelFab = cancel
	var err error
	if c.Fabric, err = vpcfabric.New(fabCtx, c.Sim, vpcfabric.Options{Name: c.Name}); err != nil {
		return fmt.Errorf("starting the VPC fabric: %w", err)
	}
	return nil
}

// newInstance launches an instance of the type in the cluster's subnet and waits for the fabric to wire its
// network namespace: the node to be, not started yet.
func (c *Cluster) newInstance(ctx context.Context, typ string) (*Node, error) {
	inst, err := c.Sim.AddInstance(ec2sim.InstanceSpec{Type: typ, SubnetID: subnetID})
	if err != nil {
		return nil, fmt.Errorf("adding a %s: %w", typ, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	netns, err := c.Fabric.WaitNode(wctx, inst.ID)
	if err != nil {
		return nil, err
	}
	name := "ip-" + strings.ReplaceAll(inst.PrimaryIP, ".", "-") + "." + c.Sim.Config().Region + ".compute.internal"
	n := &Node{Name: name, Instance: inst, Netns: netns, Dir: filepath.Join(c.Dir, "nodes", name),
		Cgroup: cgroupPrefix + c.Name + "-" + strings.SplitN(name, ".", 2)[0], kube: c.Bins.Kube, family: c.Family}
	if c.Family.HasIPv6() {
		if n.IPv6, err = c.giveIPv6(ctx, n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// startNode gives the node its mount namespace, the CNI plugins its OS would carry (loopback, portmap),
// containerd with the images, the kubelet and kube-proxy.
func (c *Cluster) startNode(ctx context.Context, n *Node) error {
	c.logf("starting node %s (%s, %s)", n.Name, n.Instance.Type, n.Instance.PrimaryIP)
	var err error
	if n.Mount, err = NewMountNS(ctx, n.Dir, filepath.Join(n.Dir, "root"), n.Name); err != nil {
		return err
	}
	for _, plugin := range []string{"loopback", "portmap"} {
		b, err := os.ReadFile(filepath.Join("/usr/lib/cni", plugin))
		if err != nil {
			return fmt.Errorf("the node's own CNI plugins come from Debian's containernetworking-plugins: %w", err)
		}
		if err := os.WriteFile(filepath.Join(n.Mount.Root, "opt/cni/bin", plugin), b, 0o755); err != nil {
			return err
		}
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.importImages(ctx, c.images); err != nil {
		return err
	}
	// IPv6 mode counts max pods as prefix delegation does.
	maxPods, err := MaxPods(n.Instance.Type, c.Family.IsIPv6())
	if err != nil {
		return err
	}
	if err := n.startKubelet(c.PKI, c.ControlPlane.Server, maxPods); err != nil {
		return err
	}
	return n.StartProxy(ctx, c.PKI, c.ControlPlane.Server, c.ProxyMode)
}

// MaxPods is kubelet's --max-pods for an instance type as eniwire computes it (pool.KubeletMaxPods,
// what `eniwirectl max-pods` prints), with /28 prefixes or secondary IPs.
func MaxPods(instanceType string, prefixes bool) (int, error) {
	it, ok := ec2sim.LookupInstanceType(instanceType)
	if !ok {
		return 0, fmt.Errorf("unknown instance type %s", instanceType)
	}
	l := metadata.Limits{MaxENIs: it.MaxENIs, IPv4PerENI: it.IPv4PerENI, VCPUs: it.VCPUs, Hypervisor: it.Hypervisor}
	return pool.KubeletMaxPods(pool.PodSettings{Prefixes: prefixes}, l).MaxPods, nil
}

// RestartKubelet restarts n's kubelet with another --max-pods (as an operator does after turning prefix
// delegation on); the pods keep running.
func (c *Cluster) RestartKubelet(n *Node, maxPods int) error {
	if n.kubelet != nil {
		if err := n.kubelet.Stop(10 * time.Second); err != nil {
			return fmt.Errorf("stopping the kubelet of %s: %w", n.Name, err)
		}
	}
	return n.startKubelet(c.PKI, c.ControlPlane.Server, maxPods)
}

// Kubectl runs the built kubectl with the admin kubeconfig.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return output(Namespaces{}.Command(ctx, append([]string{c.Bins.Kube, "kubectl", "--kubeconfig", c.Kubeconfig}, args...)...))
}

// Node returns the node of that name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Close stops every node and the control plane, closes the fabric and removes the scratch dir. It keeps
// going past errors.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		n.Stop(ctx)
	}
	if c.apiProxy != nil {
		_ = c.apiProxy.Close()
	}
	if c.ControlPlane != nil {
		c.ControlPlane.Stop()
	}
	var errs []error
	if c.Fabric != nil {
		if err := c.Fabric.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.cancelFab != nil {
		c.cancelFab()
	}
	if _, err := Cleanup(c.Name, filepath.Dir(c.Dir)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
