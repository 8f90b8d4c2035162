package cnitest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simnode"
	"github.com/eniwire/eniwire/test/simworld"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// AgentOptions shape the simulated instance and the agent's settings.
type AgentOptions struct {
	// Binary is the eniwire-agent executable.
	Binary string
	// InstanceType defaults to m5.large.
	InstanceType string
	// SubnetCIDR is the node's subnet (a /16 to /28 inside 10.0.0.0/8), where pod IPs come from; unique per
	// test so addresses never collide across parallel tests.
	SubnetCIDR string
	// Throttling turns the simulator's EC2 token buckets on.
	Throttling bool
	// WarmIPs, when set, is WARM_IP_TARGET, and StartAgent waits until that many IPs are warm.
	WarmIPs int
	// Env adds or overrides agent settings ("NAME=value").
	Env []string
	// BeforeStart, when set, runs before the agent starts, with the simulator and the agent's state dir (not
	// created yet): to set EC2 faults, or to put the journal on a file system of a given size.
	BeforeStart func(sim *ec2sim.Sim, stateDir string)
	// Unready: StartAgent returns once the agent answers on its socket, ready or not (WarmIPs is not waited for).
	Unready bool
}

// Agent is the real eniwire-agent running in the node's namespace against an in-process test/ec2sim whose
// endpoints (EC2 and the instance's IMDS) listen on the node's loopback, as they would answer a real node.
// Unlike test/simnode's full node there is no VPC fabric: the node is a bare namespace, and the agent's
// process lifecycle is simnode's Agent.
type Agent struct {
	Socket   string
	Client   *api.Client
	Sim      *ec2sim.Sim
	Instance ec2sim.Instance
	LogPath  string
	proc     *simnode.Agent
}

// StartAgent starts the simulator and the agent with its thread in node, waits until the agent is ready (and
// holds opts.WarmIPs free IPs), and stops both when the test ends. The agent's hostroute datapath adds the pod
// /32 routes in node.
func StartAgent(t testing.TB, node ns.NetNS, opts AgentOptions) *Agent {
	t.Helper()
	if opts.InstanceType == "" {
		opts.InstanceType = "m5.large"
	}
	listen := func(string) (net.Listener, error) { return vpcfabric.Listen(node.Path(), "tcp", "127.0.0.1:0") }
	ec2ln, err := listen("")
	if err != nil {
		t.Fatal(err)
	}
	adminln, err := listen("")
	if err != nil {
		t.Fatal(err)
	}
	w := simworld.New(t, simworld.Options{Type: opts.InstanceType, NoThrottling: !opts.Throttling, VPCCIDR: "10.0.0.0/8",
		Subnet: ec2sim.SubnetSpec{CIDR: opts.SubnetCIDR},
		Server: ec2sim.ServerOptions{EC2Listener: ec2ln, AdminListener: adminln, IMDSListen: listen}})
	sim, srv, inst := w.Sim, w.Server, w.Instance
	imds, err := srv.OpenIMDS(inst.ID)
	if err != nil {
		t.Fatal(err)
	}

	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "eniwire-cnitest-agent-")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir, // no shared AWS config or credentials file
		"AWS_ENDPOINT_URL_EC2=" + srv.EC2URL(),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds,
		"AWS_REGION=" + sim.Config().Region,
		"AWS_ACCESS_KEY_ID=" + ec2sim.TestAccessKey,
		"AWS_SECRET_ACCESS_KEY=" + ec2sim.TestSecretKey,
		"ENIWIRE_METRICS_ADDR=127.0.0.1:0",
		"ENIWIRE_START_JITTER=0s",
		// Routes only: the BPF datapath needs the ENIs' links, which test/simnode's fabric provides.
		"ENIWIRE_DATAPATH=hostroute",
		// Tests lay out their own CNI bin and conf dirs; the agent must not install into the host's.
		"ENIWIRE_CNI_BIN_DIR=",
		"ENIWIRE_CNI_CONF_DIR=",
		"ENIWIRE_LOG_LEVEL=debug",
	}
	if opts.WarmIPs > 0 {
		env = append(env, fmt.Sprintf("WARM_IP_TARGET=%d", opts.WarmIPs))
	}
	proc := simnode.NewAgent(simnode.AgentConfig{
		Binary: opts.Binary, Dir: dir, Socket: filepath.Join(dir, "agent.sock"), Env: append(env, opts.Env...),
		// A clean environment: only what the list above says.
		Command: func(name string, args ...string) *exec.Cmd {
			c := exec.Command(name, args...)
			c.Env = []string{}
			return c
		},
		Start: func(cmd *exec.Cmd) error { return node.Do(func(ns.NetNS) error { return cmd.Start() }) },
	})
	a := &Agent{Socket: proc.Socket(), Client: proc.Client, Sim: sim, Instance: inst, LogPath: proc.LogPath, proc: proc}
	t.Cleanup(func() {
		if err := proc.Stop(syscall.SIGINT); err != nil {
			t.Logf("stopping the agent: %v", err)
		}
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", a.LogPath, proc.LogTail(30))
		}
		_ = os.RemoveAll(dir)
	})
	if opts.BeforeStart != nil {
		opts.BeforeStart(sim, proc.StateDir())
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	start := func(ctx context.Context) error { return proc.Start(ctx, opts.WarmIPs) }
	if opts.Unready {
		start = proc.StartAnswering
	}
	if err := start(wctx); err != nil {
		t.Fatalf("%v", err)
	}
	return a
}

// WaitReady waits until the agent is ready; the test fails if it is not within a minute.
func (a *Agent) WaitReady(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.proc.WaitReady(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the agent as its DaemonSet pod is stopped (SIGTERM); the test fails if it does not exit cleanly.
func (a *Agent) Stop(t testing.TB) {
	t.Helper()
	if err := a.proc.Stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// RestartAnswering starts the stopped agent again on its state dir and returns once it answers on its socket,
// ready or not; the test fails if it does not answer within a minute.
func (a *Agent) RestartAnswering(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.proc.StartAnswering(ctx); err != nil {
		t.Fatal(err)
	}
}

// Assignments is the agent's list of assignments; the test fails if it cannot be read.
func (a *Agent) Assignments(t testing.TB) []api.Assignment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	as, err := a.Client.Assignments(ctx)
	if err != nil {
		t.Fatalf("listing the agent's assignments: %v", err)
	}
	return as
}

// Log returns what the agent wrote so far.
func (a *Agent) Log() string { return a.proc.Log() }
