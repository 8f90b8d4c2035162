// Package e2e runs a whole simulated node: the real eniwire-agent (BPF datapath) inside a vpcfabric node
// netns against test/ec2sim, and the real CNI plugin driven through libcni, with pods as network
// namespaces and remote hosts in the simulated VPC and on the internet.
//
// The plugin must run in the node netns (it creates the host veth there). libcni execs plugins in the
// caller's network namespace, so every libcni call runs on a goroutine whose OS thread entered the node
// netns (vpcfabric.Do): the forked plugin inherits the thread's namespace. This needs no wrapper script and
// keeps libcni's exit-code and result handling exactly as a runtime sees it.
//
// The agent runs through `ip netns exec`, which remounts /sys in a mount namespace of its own and so hides
// the host's /sys/fs/bpf; the test therefore mounts a bpffs of its own and pins there (a non-default
// ENIWIRE_BPF_PIN_ROOT, visible to bpftool from the test).
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

const (
	vpcCIDR    = "10.0.0.0/16"
	subnetCIDR = "10.0.0.0/20"
	metricsURL = "http://127.0.0.1:61678" // inside the node netns, so unique per run
)

// world is one node with its agent, its CNI configuration and its pods.
type world struct {
	t        *testing.T
	sim      *ec2sim.Sim
	fab      *vpcfabric.Fabric
	inst     ec2sim.Instance
	node     vpcfabric.Node
	dir      string // scratch: binaries, state, CNI dirs, logs
	agentBin string
	pinRoot  string
	confDir  string
	binDir   string
	env      []string
	client   *api.Client
	cni      *libcni.CNIConfig

	agent     *exec.Cmd
	agentDone chan error
}

// pod is a network namespace the test made and wired through CNI ADD.
type pod struct {
	name string
	ns   ns.NetNS
	ip   netip.Addr
	eni  string // ENI id, from the agent's books
	rt   *libcni.RuntimeConf
}

func newWorld(t *testing.T, extraEnv ...string) *world {
	t.Helper()
	testenv.RequireRoot(t)
	for _, tool := range []string{"ip", "nft", "bpftool"} {
		testenv.RequireTool(t, tool)
	}
	w := &world{t: t, dir: t.TempDir()}
	w.build()
	w.mountBPFFS()

	cfg := ec2sim.DefaultConfig()
	cfg.Throttling = false
	w.sim = ec2sim.New(cfg)
	must(t, w.sim.AddVPC("vpc-0e2e000000000001", vpcCIDR))
	must(t, w.sim.AddSubnet(ec2sim.SubnetSpec{ID: "subnet-0e2e000000000001", VPCID: "vpc-0e2e000000000001", CIDR: subnetCIDR, AZ: "us-west-2a"}))
	inst, err := w.sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: "subnet-0e2e000000000001"})
	must(t, err)
	w.inst = inst
	w.fab = vpcfabric.NewForTest(t, w.sim, vpcfabric.Options{Name: fmt.Sprintf("e2e%d-%04x", os.Getpid(), time.Now().UnixNano()&0xffff)})
	w.node, err = w.fab.WaitNode(ctxFor(t, 20*time.Second), inst.ID)
	must(t, err)

	// The agent's socket path must fit a sockaddr_un, which t.TempDir often does not.
	sockDir, err := os.MkdirTemp("", "e2e-sock-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	w.client = api.NewClient(sock)
	w.confDir, w.binDir = filepath.Join(w.dir, "net.d"), filepath.Join(w.dir, "cni-bin")
	for _, d := range []string{w.confDir, w.binDir} {
		must(t, os.MkdirAll(d, 0o755))
	}
	conflist := filepath.Join(w.dir, "image-conflist", "10-eniwire.conflist")
	w.writeConflist(conflist, sock)
	w.env = append([]string{
		"AWS_ACCESS_KEY_ID=" + ec2sim.TestAccessKey, "AWS_SECRET_ACCESS_KEY=" + ec2sim.TestSecretKey,
		"AWS_REGION=us-west-2", "HOME=" + w.dir,
		"ENIWIRE_STATE_DIR=" + filepath.Join(w.dir, "state"), "ENIWIRE_SOCKET=" + sock,
		"ENIWIRE_METRICS_ADDR=127.0.0.1:61678", "ENIWIRE_DATAPATH=bpf", "ENIWIRE_BPF_PIN_ROOT=" + w.pinRoot,
		"ENIWIRE_START_JITTER=0", "ENIWIRE_POOL_INTERVAL=100ms", "ENIWIRE_RELEASE_DELAY=10m",
		"ENIWIRE_CNI_BIN_DIR=" + w.binDir, "ENIWIRE_CNI_CONF_DIR=" + w.confDir, "ENIWIRE_CNI_CONFLIST=" + conflist,
		"ENIWIRE_CNI_PLUGIN=" + filepath.Join(w.dir, "bin", "eniwire"), "ENIWIRE_LOG_LEVEL=info",
	}, extraEnv...)
	w.cni = libcni.NewCNIConfigWithCacheDir([]string{w.binDir}, filepath.Join(w.dir, "cni-cache"), nil)
	return w
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// build compiles the agent and the plugin, static as they ship.
func (w *world) build() {
	out := filepath.Join(w.dir, "bin")
	cmd := exec.Command("go", "build", "-o", out+string(filepath.Separator), "./cmd/eniwire-agent", "./cmd/eniwire")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("building the agent and the plugin: %v\n%s", err, msg)
	}
	w.agentBin = filepath.Join(out, "eniwire-agent")
}

// mountBPFFS gives the run a bpffs of its own (see the package comment), unmounted at the end.
func (w *world) mountBPFFS() {
	dir, err := os.MkdirTemp("", fmt.Sprintf("e2e-bpffs-%d-", os.Getpid()))
	must(w.t, err)
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(dir)
		w.t.Fatalf("mounting bpffs at %s: %v", dir, err)
	}
	w.t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			w.t.Errorf("unmounting %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	w.pinRoot = filepath.Join(dir, "eniwire", "v1")
}

// writeConflist writes the shipped conflist (as the image carries it) pointed at this run's socket and log
// file, without portmap: the test's pods publish no host ports.
func (w *world) writeConflist(path, sock string) {
	raw, err := os.ReadFile("../../deploy/10-eniwire.conflist")
	must(w.t, err)
	var list map[string]any
	must(w.t, json.Unmarshal(raw, &list))
	list["name"] = fmt.Sprintf("eniwire-e2e-%d", os.Getpid())
	plugins := list["plugins"].([]any)
	eni := plugins[0].(map[string]any)
	eni["agentSocket"] = sock
	eni["logFile"] = filepath.Join(w.dir, "plugin.log")
	list["plugins"] = plugins[:1]
	b, err := json.MarshalIndent(list, "", "  ")
	must(w.t, err)
	must(w.t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(w.t, os.WriteFile(path, b, 0o644))
}

// startAgent runs the agent in the node netns and waits until it is ready (its /readyz answers 200).
func (w *world) startAgent() {
	w.t.Helper()
	logf, err := os.OpenFile(filepath.Join(w.dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(w.t, err)
	cmd := w.node.Command(context.Background(), w.agentBin)
	cmd.Env = append(cmd.Env, w.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		w.t.Fatalf("starting the agent: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	w.agent, w.agentDone = cmd, done
	hc := w.node.HTTPClient()
	hc.Timeout = time.Second
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			w.agentDone = nil
			w.t.Fatalf("the agent exited before it was ready: %v\n%s", err, w.agentLog())
		default:
		}
		resp, err := hc.Get(metricsURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			// Ready, and (the moment after) the plugin and the conflist are installed.
			if _, serr := os.Stat(filepath.Join(w.confDir, "10-eniwire.conflist")); resp.StatusCode == 200 && serr == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the agent is not ready after 60s (last: %v)\n%s", err, w.agentLog())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopAgent ends the agent with sig and waits for it.
func (w *world) stopAgent(sig syscall.Signal) error {
	if w.agent == nil || w.agentDone == nil {
		return nil
	}
	_ = w.agent.Process.Signal(sig)
	var err error
	select {
	case err = <-w.agentDone:
	case <-time.After(30 * time.Second):
		_ = w.agent.Process.Kill()
		err = <-w.agentDone
		err = fmt.Errorf("the agent ignored %v for 30s: %v", sig, err)
	}
	w.agent, w.agentDone = nil, nil
	if sig == syscall.SIGKILL {
		return nil
	}
	return err
}

func (w *world) agentLog() string {
	b, _ := os.ReadFile(filepath.Join(w.dir, "agent.log"))
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// runUninstall runs `eniwire-agent uninstall` in the node netns with the agent's settings.
func (w *world) runUninstall() (string, error) {
	cmd := w.node.Command(context.Background(), w.agentBin, "uninstall")
	cmd.Env = append(cmd.Env, w.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// conflist loads the conflist the agent installed.
func (w *world) conflist() *libcni.NetworkConfigList {
	w.t.Helper()
	l, err := libcni.ConfListFromFile(filepath.Join(w.confDir, "10-eniwire.conflist"))
	if err != nil {
		w.t.Fatalf("reading the installed conflist: %v", err)
	}
	return l
}

// inNode runs f on a thread inside the node netns, so the plugins libcni execs start there.
func (w *world) inNode(f func() error) error {
	var err error
	if doErr := vpcfabric.Do(w.node.NetnsPath, func() error { err = f(); return nil }); doErr != nil {
		return doErr
	}
	return err
}

// addPod creates a pod netns and runs CNI ADD for it, retrying while the pool is still filling (the agent
// answers that case with a retryable error, as kubelet would retry).
func (w *world) addPod(name string) *pod {
	w.t.Helper()
	n, err := testutils.NewNS()
	must(w.t, err)
	p := &pod{name: name, ns: n, rt: &libcni.RuntimeConf{
		ContainerID: fmt.Sprintf("e2e-%d-%s", os.Getpid(), name), NetNS: n.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "e2e"}, {"K8S_POD_NAME", name}, {"K8S_POD_UID", "uid-" + name}},
	}}
	list := w.conflist()
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.inNode(func() error { return w.cni.DelNetworkList(ctx, list, p.rt) }); err != nil {
			w.t.Errorf("CNI DEL of %s: %v", name, err)
		}
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res *current.Result
		err := w.inNode(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			r, err := w.cni.AddNetworkList(ctx, list, p.rt)
			if err != nil {
				return err
			}
			res, err = current.NewResultFromResult(r)
			return err
		})
		if err == nil {
			if len(res.IPs) != 1 {
				w.t.Fatalf("CNI ADD of %s returned %d IPs", name, len(res.IPs))
			}
			p.ip, _ = netip.AddrFromSlice(res.IPs[0].Address.IP.To4())
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("CNI ADD of %s: %v\n%s", name, err, w.agentLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	list2, err := w.client.Assignments(context.Background())
	must(w.t, err)
	for _, a := range list2 {
		if a.IP == p.ip.String() {
			p.eni = a.ENI
		}
	}
	if p.eni == "" {
		w.t.Fatalf("the agent has no assignment for %s (%s)", name, p.ip)
	}
	w.vpcDelivers(p)
	return p
}

// vpcDelivers tells the simulated VPC router the pod IP's MAC (its ENI's), as EC2's mapping service knows
// it: the fabric routes a secondary IP to the ENI's veth but leaves the router to ARP for it, and a node
// has no reason to answer ARP for an address that lives in a pod (on EC2 nothing asks).
func (w *world) vpcDelivers(p *pod) {
	w.t.Helper()
	must(w.t, w.fab.WaitIP(ctxFor(w.t, 10*time.Second), p.ip))
	var mac string
	for _, e := range w.sim.Snapshot().ENIs {
		if e.ID == p.eni {
			mac = e.MAC
		}
	}
	router, _ := w.fab.Router()
	out, err := exec.Command("ip", "netns", "exec", router, "ip", "-j", "route", "get", p.ip.String()).Output()
	must(w.t, err)
	var routes []struct {
		Dev string `json:"dev"`
	}
	if err := json.Unmarshal(out, &routes); err != nil || len(routes) != 1 || mac == "" {
		w.t.Fatalf("finding the router's link to %s (ENI %s, MAC %q): %v %s", p.ip, p.eni, mac, err, out)
	}
	if msg, err := exec.Command("ip", "netns", "exec", router, "ip", "neigh", "replace", p.ip.String(),
		"lladdr", mac, "dev", routes[0].Dev, "nud", "permanent").CombinedOutput(); err != nil {
		w.t.Fatalf("telling the router where %s lives: %v %s", p.ip, err, msg)
	}
}

// echo serves TCP on addr inside a netns: each connection first gets the peer address it sees, then every
// line back. It stops at the end of the test.
func echo(t *testing.T, nsPath string, addr netip.AddrPort) {
	t.Helper()
	l, err := vpcfabric.Listen(nsPath, "tcp4", addr.String())
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s\n", c.RemoteAddr())
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// conn is a TCP connection from a pod, with the peer address the server saw.
type conn struct {
	c    net.Conn
	r    *bufio.Reader
	seen netip.AddrPort
}

func dialFrom(ctx context.Context, p *pod, dst netip.AddrPort) (*conn, error) {
	d, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := vpcfabric.DialContext(p.ns.Path())(d, "tcp4", dst.String())
	if err != nil {
		return nil, err
	}
	out := &conn{c: c, r: bufio.NewReader(c)}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := out.r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading the server's greeting from %s: %w", dst, err)
	}
	if out.seen, err = netip.ParseAddrPort(strings.TrimSpace(line)); err != nil {
		c.Close()
		return nil, fmt.Errorf("parsing the server's greeting %q: %w", line, err)
	}
	return out, nil
}

// exchange sends one line and checks that it comes back.
func (c *conn) exchange(msg string) error {
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c.c, "%s\n", msg); err != nil {
		return fmt.Errorf("sending %q: %w", msg, err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the echo of %q: %w", msg, err)
	}
	if strings.TrimSpace(got) != msg {
		return fmt.Errorf("echo of %q came back as %q", msg, got)
	}
	return nil
}

func (c *conn) Close() error { return c.c.Close() }

// talk opens a connection from p to dst, exchanges n lines and returns the source address the server saw.
func talk(ctx context.Context, p *pod, dst netip.AddrPort, n int) (netip.Addr, error) {
	c, err := dialFrom(ctx, p, dst)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s (%s) -> %s: %w", p.name, p.ip, dst, err)
	}
	defer c.Close()
	for i := range n {
		if err := c.exchange(fmt.Sprintf("%s-%d", p.name, i)); err != nil {
			return netip.Addr{}, fmt.Errorf("%s (%s) -> %s: %w", p.name, p.ip, dst, err)
		}
	}
	return c.seen.Addr(), nil
}

// nodeOutput runs a command in the node netns and returns its stdout.
func (w *world) nodeOutput(stdin string, name string, args ...string) (string, error) {
	cmd := w.node.Command(context.Background(), name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in the node: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// metric reads one sample of the agent's /metrics, by name and label set as printed ("" labels: none).
func (w *world) metric(name, labels string) (float64, error) {
	resp, err := w.node.HTTPClient().Get(metricsURL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				return 0, fmt.Errorf("parsing %s: %w", line, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("no sample %s in /metrics: %w", want, errNoSample)
}

var errNoSample = errors.New("sample not found")
