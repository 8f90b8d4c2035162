package cnitest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// Binaries are eniwire's plugin and agent built from this tree.
type Binaries struct {
	// Dir holds both; it is a CNI bin dir (the plugin is named "eniwire").
	Dir, Plugin, Agent string
}

// BuildBinaries builds cmd/eniwire and cmd/eniwire-agent into dir, static as they ship.
func BuildBinaries(dir string) (Binaries, error) {
	b := Binaries{Dir: dir, Plugin: filepath.Join(dir, "eniwire"), Agent: filepath.Join(dir, "eniwire-agent")}
	for out, pkg := range map[string]string{b.Plugin: "cmd/eniwire", b.Agent: "cmd/eniwire-agent"} {
		build := exec.Command("go", "build", "-o", out, "github.com/eniwire/eniwire/"+pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("building %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

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
}

// Agent is the real eniwire-agent running in the node's namespace against an in-process test/ec2sim whose
// endpoints (EC2 and the instance's IMDS) listen on the node's loopback, as they would answer a real node.
type Agent struct {
	Socket   string
	Client   *api.Client
	Sim      *ec2sim.Sim
	Instance ec2sim.Instance
	LogPath  string
}

// StartAgent starts the simulator and the agent with its thread in node, waits until the agent is ready (and
// holds opts.WarmIPs free IPs), and stops both when the test ends. The agent's hostroute datapath adds the pod
// /32 routes in node.
func StartAgent(t testing.TB, node ns.NetNS, opts AgentOptions) *Agent {
	t.Helper()
	if opts.InstanceType == "" {
		opts.InstanceType = "m5.large"
	}
	cfg := ec2sim.DefaultConfig()
	cfg.Throttling = opts.Throttling
	sim := ec2sim.New(cfg)
	if err := sim.AddVPC("vpc-cnitest", "10.0.0.0/8"); err != nil {
		t.Fatal(err)
	}
	if err := sim.AddSubnet(ec2sim.SubnetSpec{ID: "subnet-cnitest", VPCID: "vpc-cnitest", CIDR: opts.SubnetCIDR}); err != nil {
		t.Fatal(err)
	}
	inst, err := sim.AddInstance(ec2sim.InstanceSpec{Type: opts.InstanceType, SubnetID: "subnet-cnitest"})
	if err != nil {
		t.Fatal(err)
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
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := ec2sim.Start(ctx, sim, ec2sim.ServerOptions{EC2Listener: ec2ln, AdminListener: adminln, IMDSListen: listen})
	if err != nil {
		cancel()
		t.Fatalf("starting ec2sim: %v", err)
	}
	t.Cleanup(func() { cancel(); srv.Close() })
	imds, err := srv.OpenIMDS(inst.ID)
	if err != nil {
		t.Fatal(err)
	}

	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "eniwire-cnitest-agent-")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Socket: filepath.Join(dir, "agent.sock"), Sim: sim, Instance: inst, LogPath: filepath.Join(dir, "agent.log")}
	a.Client = api.NewClient(a.Socket)
	logf, err := os.Create(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(opts.Binary)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir, // no shared AWS config or credentials file
		"AWS_ENDPOINT_URL_EC2=" + srv.EC2URL(),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds,
		"AWS_REGION=" + cfg.Region,
		"AWS_ACCESS_KEY_ID=" + ec2sim.TestAccessKey,
		"AWS_SECRET_ACCESS_KEY=" + ec2sim.TestSecretKey,
		"ENIWIRE_STATE_DIR=" + filepath.Join(dir, "state"),
		"ENIWIRE_SOCKET=" + a.Socket,
		"ENIWIRE_METRICS_ADDR=127.0.0.1:0",
		"ENIWIRE_START_JITTER=0s",
		// Routes only: the BPF datapath needs the ENIs' links, which the e2e suite's fabric provides.
		"ENIWIRE_DATAPATH=hostroute",
		// Tests lay out their own CNI bin and conf dirs; the agent must not install into the host's.
		"ENIWIRE_CNI_BIN_DIR=",
		"ENIWIRE_CNI_CONF_DIR=",
		"ENIWIRE_LOG_LEVEL=debug",
	}
	if opts.WarmIPs > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("WARM_IP_TARGET=%d", opts.WarmIPs))
	}
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := node.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		t.Fatalf("starting eniwire-agent: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logf.Close()
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", a.LogPath, tail(a.Log(), 30))
		}
		_ = os.RemoveAll(dir)
	})
	if err := a.waitReady(exited, opts.WarmIPs, 60*time.Second); err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, tail(a.Log(), 30))
	}
	return a
}

// waitReady polls the agent's status until it is ready with at least warm free IPs, it exits, or the deadline.
func (a *Agent) waitReady(exited <-chan error, warm int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("eniwire-agent exited before it was ready: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := a.Client.Status(ctx)
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case st.Ready && st.Warm >= warm:
			return nil
		default:
			last = fmt.Sprintf("ready %v (%s), %d warm, pool %q", st.Ready, st.Reason, st.Warm, st.PoolStatus)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("eniwire-agent not ready after %v: %s", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
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
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
