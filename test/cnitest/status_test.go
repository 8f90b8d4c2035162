package cnitest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// A runtime that calls STATUS (containerd's go-cni) reports a failure as the CRI's NetworkReady=false, and
// kubelet turns that into the node's Ready condition going false: every pod without a longer toleration is
// evicted. So STATUS fails only when ADD cannot work at all; a full node is healthy and answers success.

// statusNode is a node with a real agent and the shipped conflist at spec 1.1.0 (the first with STATUS),
// driven through libcni as a runtime drives it.
type statusNode struct {
	node  ns.NetNS
	agent *Agent
	list  *libcni.NetworkConfigList
	cni   *libcni.CNIConfig
}

func newStatusNode(t *testing.T, nodeIP string, opts AgentOptions) *statusNode {
	t.Helper()
	node := NewNode(t, nodeIP)
	opts.Binary = bins.Agent
	agent := StartAgent(t, node, opts)
	return &statusNode{node: node, agent: agent, list: deployConflist(t, agent.Socket, "1.1.0", false), cni: newLibcni(t)}
}

// status is the runtime's STATUS of the network.
func (n *statusNode) status(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return inNode(t, n.node, func() error { return n.cni.GetStatusNetworkList(ctx, n.list) })
}

// add is the runtime's ADD of a new pod.
func (n *statusNode) add(t *testing.T, id string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt := runtimeConf(id, NewNS(t))
	return inNode(t, n.node, func() error { _, err := n.cni.AddNetworkList(ctx, n.list, rt); return err })
}

// fill adds pods until an ADD fails with "try again later" for a whole 10 s (the agent had the time to grow
// the pool, and did not) and returns that failure with the number of pods added.
func (n *statusNode) fill(t *testing.T) (int, error) {
	t.Helper()
	pods := 0
	var since time.Time
	for {
		err := n.add(t, fmt.Sprintf("pod-%d", pods))
		switch {
		case err == nil:
			pods++
			since = time.Time{}
			continue
		case cniCode(err) != types.ErrTryAgainLater:
			t.Fatalf("ADD of pod %d: %v, want success or code %d", pods, err, types.ErrTryAgainLater)
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > 10*time.Second:
			return pods, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *statusNode) agentStatus(t *testing.T) *api.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := n.agent.Client.Status(ctx)
	if err != nil {
		t.Fatalf("reading the agent's status: %v", err)
	}
	return st
}

// cniCode is the CNI error code of err (0 when err carries none).
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestLibcniStatusSucceedsOnAFullNode(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		name, nodeIP string
		opts         AgentOptions
		// cause is what the failing ADD says: why no IP is free.
		cause []string
		// full checks the agent's status once no ADD succeeds any more.
		full func(st *api.Status) error
	}{
		{"with no warm IP at max pods", "10.222.255.1",
			AgentOptions{SubnetCIDR: "10.222.0.0/20", WarmIPs: 2, Env: []string{"MAX_PODS=3"}}, []string{"max pods reached", "(3/3 pods assigned)"},
			func(st *api.Status) error {
				if st.MaxPods != 3 || st.Assigned != 3 || st.Warm != 0 {
					return fmt.Errorf("max pods %d, %d assigned, %d warm; want 3, 3, 0", st.MaxPods, st.Assigned, st.Warm)
				}
				return nil
			}},
		// A t3.micro holds 2 ENIs of one pod IP each; its max pods (4) counts 2 host-network pods beside them.
		{"with every ENI full below max pods", "10.223.255.1",
			AgentOptions{SubnetCIDR: "10.223.0.0/20", InstanceType: "t3.micro"}, []string{"no IP address is free", "at the ENI limit"},
			func(st *api.Status) error {
				if len(st.ENIs) != st.MaxENIs || st.Warm != 0 || st.Assigned >= st.MaxPods {
					return fmt.Errorf("%d of %d ENIs, %d warm, %d assigned of max pods %d; want every ENI, none warm, below max pods",
						len(st.ENIs), st.MaxENIs, st.Warm, st.Assigned, st.MaxPods)
				}
				for _, e := range st.ENIs {
					if e.Warm != 0 || e.Assigned != len(e.IPs) {
						return fmt.Errorf("ENI %s: %d of %d IPs assigned, %d warm; want it full", e.ID, e.Assigned, len(e.IPs), e.Warm)
					}
				}
				return nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newStatusNode(t, tc.nodeIP, tc.opts)
			pods, addErr := n.fill(t)
			st := n.agentStatus(t)
			if err := tc.full(st); err != nil {
				t.Fatalf("after %d pods the agent's status: %v", pods, err)
			}
			for _, want := range tc.cause {
				if !strings.Contains(addErr.Error(), want) {
					t.Errorf("ADD on the full node = %v, want it to say %q", addErr, want)
				}
			}
			if err := n.status(t); err != nil {
				t.Fatalf("STATUS of a full node (%d pods, %d warm, pool %q) = %v (code %d), want success: a full node is not a broken network",
					pods, st.Warm, st.PoolStatus, err, cniCode(err))
			}
		})
	}
}

func TestLibcniStatusFailsWhenAddCannotWork(t *testing.T) {
	testenv.RequireRoot(t)
	wantUnavailable := func(t *testing.T, err error, says ...string) {
		t.Helper()
		if err == nil || cniCode(err) != types.ErrPluginNotAvailable {
			t.Fatalf("STATUS = %v (code %d), want code %d", err, cniCode(err), types.ErrPluginNotAvailable)
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("STATUS = %v, want it to say %q", err, s)
			}
		}
	}

	t.Run("the agent is stopped", func(t *testing.T) {
		n := newStatusNode(t, "10.224.255.1", AgentOptions{SubnetCIDR: "10.224.0.0/20", WarmIPs: 1})
		if err := n.status(t); err != nil {
			t.Fatalf("STATUS of a ready agent: %v", err)
		}
		n.agent.Stop(t)
		wantUnavailable(t, n.status(t), "not reachable at "+n.agent.Socket)
	})

	t.Run("a restarted agent serves from its journal while EC2 refuses Describe", func(t *testing.T) {
		// Ready after a restart is the journal replayed and the books' ENIs up; the reconcile with EC2 runs
		// in the background. (Until issue 36 this agent answered STATUS "not ready" until a Describe
		// succeeded: every rollout's restart, and for good while Describe was refused.)
		n := newStatusNode(t, "10.225.255.1", AgentOptions{SubnetCIDR: "10.225.0.0/20", WarmIPs: 1})
		n.agent.Stop(t)
		n.agent.Sim.Faults().SetProbability("DescribeNetworkInterfaces", "UnauthorizedOperation", 1)
		defer n.agent.Sim.Faults().Reset()
		n.agent.RestartAnswering(t)
		n.agent.WaitReady(t)
		if err := n.status(t); err != nil {
			t.Fatalf("STATUS of the restarted agent while EC2 refuses Describe: %v", err)
		}
	})

	t.Run("the journal is broken", func(t *testing.T) {
		// The journal lives on a small tmpfs: once it is full, the next assignment's write fails, the journal
		// refuses every write after it and the agent stops so that a restart replays what the disk holds.
		n := newStatusNode(t, "10.226.255.1", AgentOptions{SubnetCIDR: "10.226.0.0/20", WarmIPs: 2,
			BeforeStart: func(_ *ec2sim.Sim, stateDir string) { mountTmpfs(t, stateDir, "1m") }})
		if err := n.status(t); err != nil {
			t.Fatalf("STATUS of a ready agent: %v", err)
		}
		fillFS(t, n.agent.proc.StateDir())
		// Records go on fitting into the journal's last page; one of the next ADDs' records does not.
		for i := 0; n.add(t, fmt.Sprintf("after-disk-full-%d", i)) == nil; i++ {
			if i == 30 {
				t.Fatal("30 ADDs succeeded with the journal's file system full")
			}
		}
		// The agent says why it is not ready until it has stopped, and is unreachable after.
		err := n.status(t)
		wantUnavailable(t, err)
		if !strings.Contains(err.Error(), "journal") && !strings.Contains(err.Error(), "not reachable at "+n.agent.Socket) {
			t.Errorf("STATUS = %v, want it to name the journal or the socket", err)
		}
		if log := n.agent.Log(); !strings.Contains(log, "journal failed") {
			t.Errorf("the agent did not log its journal's failure:\n%s", log)
		}
	})
}

// mountTmpfs mounts a tmpfs of size at dir for the test.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mounting a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fillFS writes a file into dir until its file system has no room left.
func fillFS(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(dir + "/filler")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatalf("filling %s: %v", dir, err)
		}
	}
}
