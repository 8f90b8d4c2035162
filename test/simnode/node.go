// Package simnode runs one simulated EC2 node end to end: test/ec2sim in-process, test/vpcfabric turning
// it into network namespaces, the real eniwire-agent (BPF datapath) inside the node's netns, and the real
// CNI plugin driven through libcni as a runtime would, with pods as network namespaces. The demo and the
// end-to-end tests share it; it returns errors and takes a logger, and NewForTest wraps it for tests.
//
// The agent runs through `ip netns exec`, which remounts /sys in a mount namespace of its own and so hides
// the host's /sys/fs/bpf: the node mounts a bpffs of its own in its scratch dir and the agent pins there
// (ENIWIRE_BPF_PIN_ROOT), where bpftool and eniwirectl find it from the host.
//
// libcni execs plugins in the caller's network namespace, so every libcni call runs on a thread that
// entered the node netns (vpcfabric.Do): the plugin inherits it and creates the host veth in the node.
//
// Everything a node makes is named after Options.Name: netns "<name>-..." (fabric and pods) and the scratch
// dir "<tmp>/<name>", so Cleanup(prefix) removes what a crashed run left.
package simnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// Options shape a simulated node. Zero values take the defaults.
type Options struct {
	// Name prefixes every netns and the scratch dir (default "sn<pid>-<rand>"); keep it short.
	Name string
	// InstanceType defaults to m5.large (3 ENIs of 10 addresses).
	InstanceType string
	// VPCCIDR and SubnetCIDR default to 10.0.0.0/16 and 10.0.0.0/20 (the fabric's VPC host is 10.0.255.10).
	VPCCIDR, SubnetCIDR string
	// Sim configures the simulator; nil: ec2sim.DefaultConfig() with throttling off.
	Sim *ec2sim.Config
	// Binaries to run; zero: the run's prebuilt ones (ENIWIRE_TEST_BIN), or built from this module into the scratch dir.
	Binaries Binaries
	// AgentEnv adds or overrides the agent's settings ("NAME=value").
	AgentEnv []string
	// IPv6 runs the agent in IPv6 mode (ENABLE_IPv6, with the prefix delegation and the IPv6 Service range,
	// IPv6ServiceCIDR, it needs) in a VPC and subnet that hold IPv6 blocks (ec2sim.DualStackVPCIPv6 and
	// DualStackSubnetAIPv6).
	IPv6 bool
	// DualStack, with IPv6, runs the agent in dual-stack mode (ENABLE_IPv4 too): each pod an IPv4 of the
	// warm pool and an IPv6 of the /80.
	DualStack bool
	// TmpDir is where the scratch dir goes (default os.TempDir()).
	TmpDir string
	Logger *slog.Logger
}

// IPv6ServiceCIDR is the Service range an IPv6 node's agent is told (ENIWIRE_SERVICE_CIDRS), as an IPv6
// cluster's kube-apiserver --service-cluster-ip-range would give it.
const IPv6ServiceCIDR = "fd00:10:96::/112"

const (
	vpcID    = "vpc-0517e0de00000001"
	subnetID = "subnet-0517e0de00000001"
	// MetricsURL is where the agent serves /metrics inside the node netns (private to the node).
	MetricsURL = "http://127.0.0.1:61678"
	// ConflistName is the file the agent installs into the CNI conf dir.
	ConflistName = "10-eniwire.conflist"
)

// Node is one simulated instance with its fabric, agent, CNI configuration and pods.
type Node struct {
	Name     string
	Dir      string // scratch: state, sockets, CNI dirs, logs, bpffs mount
	Sim      *ec2sim.Sim
	Fabric   *vpcfabric.Fabric
	Instance ec2sim.Instance
	Netns    vpcfabric.Node
	Bins     Binaries
	Agent    *Agent
	// PinRoot is the agent's bpffs pin root; BinDir and ConfDir the CNI dirs it installs into.
	PinRoot, BinDir, ConfDir string

	log       *slog.Logger
	cancelFab context.CancelFunc
	bpffs     string
	cni       *libcni.CNIConfig
	mu        sync.Mutex
	pods      map[string]*Pod
	closed    bool
}

// New starts the simulator and the fabric, adds one instance, mounts the node's bpffs and prepares (does not
// start) its agent. On error everything made so far is removed.
func New(ctx context.Context, opts Options) (_ *Node, err error) {
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("sn%d-%04x", os.Getpid(), rand.N(0x10000))
	}
	if opts.InstanceType == "" {
		opts.InstanceType = "m5.large"
	}
	if opts.VPCCIDR == "" {
		opts.VPCCIDR = "10.0.0.0/16"
	}
	if opts.SubnetCIDR == "" {
		opts.SubnetCIDR = "10.0.0.0/20"
	}
	if opts.TmpDir == "" {
		opts.TmpDir = os.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{Name: opts.Name, Dir: filepath.Join(opts.TmpDir, opts.Name), log: opts.Logger, pods: map[string]*Pod{}}
	if err := os.Mkdir(n.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the scratch dir: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()

	n.Bins = opts.Binaries
	if n.Bins.Agent == "" {
		var ok bool
		if n.Bins, ok, err = Prebuilt(); err != nil {
			return nil, err
		}
		if !ok {
			// The build is not held to ctx's deadline, which is sized for the node's start.
			opts.Logger.Info("building binaries", "dir", filepath.Join(n.Dir, "bin"))
			if n.Bins, err = BuildBinaries(context.WithoutCancel(ctx), filepath.Join(n.Dir, "bin")); err != nil {
				return nil, err
			}
		}
	}
	if err := n.mountBPFFS(); err != nil {
		return nil, err
	}

	cfg := ec2sim.DefaultConfig()
	cfg.Throttling = false
	if opts.Sim != nil {
		cfg = *opts.Sim
	}
	n.Sim = ec2sim.New(cfg)
	if err := n.Sim.AddVPC(vpcID, opts.VPCCIDR); err != nil {
		return nil, fmt.Errorf("adding the VPC: %w", err)
	}
	subnet := ec2sim.SubnetSpec{ID: subnetID, VPCID: vpcID, CIDR: opts.SubnetCIDR, AZ: cfg.Region + "a"}
	if opts.IPv6 {
		if _, err := n.Sim.AddVPCIPv6Block(vpcID, ec2sim.DualStackVPCIPv6); err != nil {
			return nil, fmt.Errorf("adding the VPC's IPv6 block: %w", err)
		}
		subnet.IPv6CIDR = ec2sim.DualStackSubnetAIPv6
		opts.AgentEnv = append([]string{"ENABLE_IPv6=true", "ENABLE_PREFIX_DELEGATION=true", "ENIWIRE_SERVICE_CIDRS=" + IPv6ServiceCIDR,
			"ENABLE_IPv4=" + strconv.FormatBool(opts.DualStack)}, opts.AgentEnv...)
	}
	if err := n.Sim.AddSubnet(subnet); err != nil {
		return nil, fmt.Errorf("adding the subnet: %w", err)
	}
	fabCtx, cancel := context.WithCancel(context.Background())
	n.cancelFab = cancel
	if n.Fabric, err = vpcfabric.New(fabCtx, n.Sim, vpcfabric.Options{Name: opts.Name, Logger: opts.Logger}); err != nil {
		return nil, fmt.Errorf("starting the VPC fabric: %w", err)
	}
	if n.Instance, err = n.Sim.AddInstance(ec2sim.InstanceSpec{Type: opts.InstanceType, SubnetID: subnetID}); err != nil {
		return nil, fmt.Errorf("adding the instance: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if n.Netns, err = n.Fabric.WaitNode(wctx, n.Instance.ID); err != nil {
		return nil, fmt.Errorf("waiting for the node netns: %w", err)
	}

	n.BinDir, n.ConfDir = filepath.Join(n.Dir, "cni-bin"), filepath.Join(n.Dir, "net.d")
	for _, d := range []string{n.BinDir, n.ConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("making %s: %w", d, err)
		}
	}
	socket := filepath.Join(n.Dir, "agent.sock")
	conflist := filepath.Join(n.Dir, "image-conflist", ConflistName)
	if err := writeConflist(conflist, opts.Name, socket, filepath.Join(n.Dir, "plugin.log")); err != nil {
		return nil, err
	}
	env := append([]string{
		"AWS_ACCESS_KEY_ID=" + ec2sim.TestAccessKey, "AWS_SECRET_ACCESS_KEY=" + ec2sim.TestSecretKey,
		"AWS_REGION=" + cfg.Region, "HOME=" + n.Dir, // no shared AWS config or credentials file
		"ENIWIRE_METRICS_ADDR=127.0.0.1:61678", "ENIWIRE_DATAPATH=bpf", "ENIWIRE_BPF_PIN_ROOT=" + n.PinRoot,
		"ENIWIRE_SYSCTL_ROOT=/proc/sys", // the agent runs on the node itself, not in a container
		"ENIWIRE_START_JITTER=0", "ENIWIRE_POOL_INTERVAL=100ms", "ENIWIRE_RELEASE_DELAY=10m",
		"ENIWIRE_CNI_BIN_DIR=" + n.BinDir, "ENIWIRE_CNI_CONF_DIR=" + n.ConfDir, "ENIWIRE_CNI_CONFLIST=" + conflist,
		"ENIWIRE_CNI_PLUGIN=" + n.Bins.Plugin, "ENIWIRE_LOG_LEVEL=info",
		"ENABLE_NETWORK_POLICY=false", // no Kubernetes API in the simulated node
	}, opts.AgentEnv...)
	node := n.Netns
	n.Agent = NewAgent(AgentConfig{
		Binary: n.Bins.Agent, Dir: n.Dir, Socket: socket, Env: env,
		Command: func(name string, args ...string) *exec.Cmd {
			return node.Command(context.Background(), name, args...)
		},
		HTTP: node.HTTPClient(), MetricsURL: MetricsURL, ConfDir: n.ConfDir, Logger: opts.Logger,
	})
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{n.BinDir}, filepath.Join(n.Dir, "cni-cache"), nil)
	opts.Logger.Info("node ready", "name", opts.Name, "instance", n.Instance.ID, "netns", n.Netns.Netns)
	return n, nil
}

// mountBPFFS gives the node a bpffs of its own (see the package comment).
func (n *Node) mountBPFFS() error {
	dir := filepath.Join(n.Dir, "bpffs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("making the bpffs mount point: %w", err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mounting bpffs at %s: %w", dir, err)
	}
	n.bpffs = dir
	n.PinRoot = filepath.Join(dir, "eniwire", "v1")
	return nil
}

// writeConflist writes the shipped conflist (as the image carries it) pointed at this node's socket and log
// file, without portmap: the pods publish no host ports.
func writeConflist(path, name, socket, logFile string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", ConflistName))
	if err != nil {
		return fmt.Errorf("reading the shipped conflist: %w", err)
	}
	list := map[string]any{}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("parsing the shipped conflist: %w", err)
	}
	list["name"] = "eniwire-" + name
	plugins := list["plugins"].([]any)
	eni := plugins[0].(map[string]any)
	eni["agentSocket"], eni["logFile"] = socket, logFile
	list["plugins"] = plugins[:1]
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the conflist: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the conflist: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing the conflist: %w", err)
	}
	return nil
}

// StartAgent starts the agent and waits until it is ready with warm free IPs and its conflist installed.
func (n *Node) StartAgent(ctx context.Context, warm int) error { return n.Agent.Start(ctx, warm) }

// Close deletes every pod (CNI DEL, then its netns), stops the agent (SIGTERM), runs `eniwire-agent
// uninstall`, closes the fabric (its netns and links), unmounts the bpffs and removes the scratch dir. It is
// idempotent and keeps going past errors, which it returns joined.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	pods := make([]*Pod, 0, len(n.pods))
	for _, p := range n.pods {
		pods = append(pods, p)
	}
	n.mu.Unlock()

	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range pods {
		if n.Agent != nil && n.Agent.Running() {
			if err := n.DelPod(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
		if err := p.removeNetns(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Agent != nil {
		if err := n.Agent.Stop(syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
		if n.Netns.Netns != "" {
			if out, err := n.Agent.Uninstall(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s", err, out))
			}
		}
	}
	if n.Fabric != nil {
		if err := n.Fabric.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the fabric: %w", err))
		}
	}
	if n.cancelFab != nil {
		n.cancelFab()
	}
	if n.bpffs != "" {
		if err := unix.Unmount(n.bpffs, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", n.bpffs, err))
		}
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", n.Dir, err))
	}
	n.log.Info("node removed", "name", n.Name)
	return errors.Join(errs...)
}
