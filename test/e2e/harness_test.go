// Package e2e runs a whole simulated node: the real eniwire-agent (BPF datapath) inside a vpcfabric node
// netns against test/ec2sim, and the real CNI plugin driven through libcni, with pods as network
// namespaces and remote hosts in the simulated VPC and on the internet. The node, the agent's lifecycle,
// the libcni calls and the traffic helpers are test/simnode's (shared with the demo); this file adapts
// them to the test's vocabulary.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simnode"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

const metricsURL = simnode.MetricsURL // inside the node netns, so unique per run

// world is one node with its agent, its CNI configuration and its pods.
type world struct {
	t       *testing.T
	n       *simnode.Node
	sim     *ec2sim.Sim
	fab     *vpcfabric.Fabric
	inst    ec2sim.Instance
	node    vpcfabric.Node
	pinRoot string
	confDir string
	binDir  string
	client  *api.Client
}

// pod is a network namespace the test made and wired through CNI ADD.
type pod struct {
	*simnode.Pod
	name string
	ns   podNS
	ip   netip.Addr
	eni  string // ENI id, from the agent's books
}

// podNS is a pod's netns path, with the Path method the tests call.
type podNS string

func (p podNS) Path() string { return string(p) }

var errNoSample = simnode.ErrNoSample

func newWorld(t *testing.T, extraEnv ...string) *world {
	t.Helper()
	return newWorldWith(t, simnode.Options{AgentEnv: extraEnv})
}

// newWorldWith is newWorld with the node's options (its name is set here).
func newWorldWith(t *testing.T, opts simnode.Options) *world {
	t.Helper()
	opts.Name = fmt.Sprintf("e2e%d-%04x", syscall.Getpid(), time.Now().UnixNano()&0xffff)
	if opts.Binaries.Agent == "" {
		opts.Binaries = bins
	}
	n := simnode.NewForTest(t, opts)
	return &world{t: t, n: n, sim: n.Sim, fab: n.Fabric, inst: n.Instance, node: n.Netns, pinRoot: n.PinRoot,
		confDir: n.ConfDir, binDir: n.BinDir, client: n.Agent.Client}
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

// startAgent runs the agent in the node netns and waits until it is ready and its conflist installed.
func (w *world) startAgent() {
	w.t.Helper()
	if err := w.n.StartAgent(ctxFor(w.t, 60*time.Second), 0); err != nil {
		w.t.Fatal(err)
	}
}

// stopAgent ends the agent with sig and waits for it.
func (w *world) stopAgent(sig syscall.Signal) error { return w.n.Agent.Stop(sig) }

func (w *world) agentLog() string { return w.n.Agent.LogTail(60) }

// runUninstall runs `eniwire-agent uninstall` in the node netns with the agent's settings.
func (w *world) runUninstall() (string, error) { return w.n.Agent.Uninstall(context.Background()) }

// addPod creates a pod netns and runs CNI ADD for it through libcni (retrying while the pool fills, as
// kubelet would), and CNI DEL at the end of the test.
func (w *world) addPod(name string) *pod {
	w.t.Helper()
	p, err := w.n.AddPod(ctxFor(w.t, 40*time.Second), name)
	if err != nil {
		w.t.Fatalf("%v\n%s", err, w.agentLog())
	}
	w.t.Cleanup(func() {
		if err := w.n.DelPod(ctxFor(w.t, 20*time.Second), p); err != nil {
			w.t.Errorf("%v", err)
		}
	})
	return &pod{Pod: p, name: p.Name, ns: podNS(p.NetnsPath), ip: p.IP, eni: p.ENI}
}

// echo serves TCP (and UDP) echo on addr inside a netns until the end of the test; a TCP connection first
// gets the peer address the server sees.
func echo(t *testing.T, nsPath string, addr netip.AddrPort) {
	t.Helper()
	e, err := simnode.StartEcho(nsPath, addr)
	must(t, err)
	t.Cleanup(func() { e.Close() })
}

func dialFrom(ctx context.Context, p *pod, dst netip.AddrPort) (*simnode.Conn, error) {
	return simnode.Dial(ctx, p.NetnsPath, dst)
}

// talk opens a connection from p to dst, exchanges n lines and returns the source address the server saw.
func talk(ctx context.Context, p *pod, dst netip.AddrPort, n int) (netip.Addr, error) {
	seen, err := simnode.Talk(ctx, p.NetnsPath, dst, n)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s (%s) -> %s: %w", p.name, p.ip, dst, err)
	}
	return seen, nil
}

// nodeOutput runs a command in the node netns and returns its stdout.
func (w *world) nodeOutput(stdin string, name string, args ...string) (string, error) {
	return w.n.Output(context.Background(), stdin, name, args...)
}

// metric reads one sample of the agent's /metrics, by name and label set as printed ("" labels: none).
func (w *world) metric(name, labels string) (float64, error) {
	return w.n.Agent.Metric(context.Background(), name, labels)
}

// spoofDrops is from_pod's count of packets dropped as spoofed (0 before the first).
func (w *world) spoofDrops(t *testing.T) float64 {
	t.Helper()
	v, err := w.metric("eniwire_datapath_packets_total", `program="from_pod",verdict="dropped_spoof"`)
	if err != nil && !errors.Is(err, errNoSample) {
		t.Fatal(err)
	}
	return v
}

// waitSpoofDrops waits until from_pod has dropped n more packets as spoofed than before.
func (w *world) waitSpoofDrops(t *testing.T, before float64, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err := w.metric("eniwire_datapath_packets_total", `program="from_pod",verdict="dropped_spoof"`)
		if err == nil && after-before >= float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dropped_spoof went from %v to %v (err %v), want +%d", before, after, err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flow is a long-lived TCP connection exchanging a line every 20ms until stopped.
type flow struct{ *simnode.Flow }

func startFlow(ctx context.Context, t *testing.T, p *pod, dst netip.AddrPort) *flow {
	t.Helper()
	f, err := simnode.StartFlow(ctx, p.NetnsPath, dst)
	must(t, err)
	t.Cleanup(func() { _ = f.Stop() })
	return &flow{f}
}

func (f *flow) count() int { return f.Count() }

// waitMore waits until k more exchanges have succeeded.
func (f *flow) waitMore(t *testing.T, k int) {
	t.Helper()
	if err := f.WaitMore(ctxFor(t, 15*time.Second), k); err != nil {
		t.Fatal(err)
	}
}

func (f *flow) stop() error { return f.Stop() }

// killAndRestartAgent kills the agent (SIGKILL), starts it again and returns its books' assignments by IP.
func (w *world) killAndRestartAgent(t *testing.T, ctx context.Context) map[netip.Addr]api.Assignment {
	t.Helper()
	if err := w.stopAgent(syscall.SIGKILL); err != nil {
		t.Errorf("killing the agent: %v", err)
	}
	w.startAgent()
	as, err := w.client.Assignments(ctx)
	must(t, err)
	books := map[netip.Addr]api.Assignment{}
	for _, a := range as {
		if ip, err := netip.ParseAddr(a.IP); err == nil {
			books[ip] = a
		}
	}
	return books
}
