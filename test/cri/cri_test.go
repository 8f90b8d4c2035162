package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/cnitest"
	"github.com/eniwire/eniwire/test/simnode"
)

// bins are eniwire's plugin and agent built from this tree for the package run.
var bins simnode.Binaries

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	var remove func()
	var err error
	if bins, remove, err = simnode.BuildTemp(context.Background(), "eniwire-cri-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	// containerd finds runc, and portmap iptables, there.
	_ = os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	return m.Run()
}

// cniDirs lays out a bin dir (eniwire plus Debian's loopback, which containerd's CRI runs for lo, and
// portmap) and a conf dir holding the shipped conflist pointed at socket.
func cniDirs(t *testing.T, socket string) Options {
	t.Helper()
	bin, conf := t.TempDir(), t.TempDir()
	links := map[string]string{"eniwire": bins.Plugin, "loopback": "/usr/lib/cni/loopback", "portmap": "/usr/lib/cni/portmap"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("../../deploy/10-eniwire.conflist")
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	eni := list["plugins"].([]any)[0].(map[string]any)
	eni["agentSocket"] = socket
	eni["logFile"] = filepath.Join(conf, "eniwire.log")
	b, _ := json.Marshal(list)
	if err := os.WriteFile(filepath.Join(conf, "10-eniwire.conflist"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{BinDir: bin, ConfDir: conf}
}

func TestPodSandboxesFromContainerdCRIGetEniwireNetworking(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"containerd", "runc", "ctr", "crictl", "iptables"} {
		testenv.RequireTool(t, tool)
	}
	if _, err := os.Stat("/usr/lib/cni/loopback"); err != nil {
		testenv.Unavailable(t, "Debian's containernetworking-plugins is not installed")
	}
	const (
		nodeIP     = "10.218.255.1"
		subnetCIDR = "10.218.0.0/20"
		hostPort   = 18081
		podPort    = 8081
	)
	node := cnitest.NewNode(t, nodeIP)
	agent := cnitest.StartAgent(t, node, cnitest.AgentOptions{Binary: bins.Agent, SubnetCIDR: subnetCIDR, WarmIPs: 3})
	opts := cniDirs(t, agent.Socket)
	ctrd := StartContainerd(t, node, opts)
	ctrd.ImportPause(t)

	a := ctrd.RunPod(t, "cri-test", "pod-a", PortMapping{HostPort: hostPort, ContainerPort: podPort})
	b := ctrd.RunPod(t, "cri-test", "pod-b")
	if a.IP == "" || b.IP == "" || a.IP == b.IP {
		t.Fatalf("CRI reports pod IPs %q and %q, want two distinct addresses", a.IP, b.IP)
	}
	_, subnet, _ := net.ParseCIDR(subnetCIDR)
	for _, ip := range []string{a.IP, b.IP} {
		if !subnet.Contains(net.ParseIP(ip)) {
			t.Errorf("pod IP %s is not from the node's subnet %s", ip, subnetCIDR)
		}
	}
	if as := agent.Assignments(t); len(as) != 2 {
		t.Fatalf("agent holds %d assignments after two runp, want 2: %+v", len(as), as)
	}
	nsA, nsB := openNS(t, a.Netns), openNS(t, b.Netns)

	tests := []struct {
		name     string
		from, to ns.NetNS
		addr     string
	}{
		{"pod a reaches pod b", nsA, nsB, b.IP},
		{"pod b reaches pod a", nsB, nsA, a.IP},
		{"pod a reaches the node", nsA, node, nodeIP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := cnitest.Serve(t, tc.to, tc.addr, "hi "+tc.addr)
			if got, err := cnitest.Fetch(tc.from, addr); err != nil || got != "hi "+tc.addr {
				t.Fatalf("fetch %s = %q, %v", addr, got, err)
			}
		})
	}
	t.Run("pod b reaches pod a through its host port", func(t *testing.T) {
		cnitest.Serve(t, nsA, fmt.Sprintf("%s:%d", a.IP, podPort), "via hostport")
		addr := fmt.Sprintf("%s:%d", nodeIP, hostPort)
		if got, err := cnitest.Fetch(nsB, addr); err != nil || got != "via hostport" {
			t.Fatalf("fetch %s = %q, %v", addr, got, err)
		}
	})

	for _, sb := range []Sandbox{a, b} {
		if out, err := ctrd.Crictl("stopp", sb.ID); err != nil {
			t.Fatalf("crictl stopp: %v %s", err, out)
		}
		if out, err := ctrd.Crictl("rmp", sb.ID); err != nil {
			t.Fatalf("crictl rmp: %v %s", err, out)
		}
	}
	if as := agent.Assignments(t); len(as) != 0 {
		t.Errorf("assignments left after stopp/rmp: %+v", as)
	}
	// The agent removes host veths in the background after it answers DEL.
	if links := cnitest.LinksGone(t, node, plumbing.HostVethPrefix, 5*time.Second); len(links) != 0 {
		t.Errorf("host veths left 5s after stopp/rmp: %v", links)
	}
	if log, _ := os.ReadFile(filepath.Join(opts.ConfDir, "eniwire.log")); !strings.Contains(string(log), "pod wired") {
		t.Errorf("plugin log lacks the ADD line:\n%s", log)
	}
}

func openNS(t *testing.T, path string) ns.NetNS {
	t.Helper()
	n, err := ns.GetNS(path)
	if err != nil {
		t.Fatalf("opening pod netns %s: %v", path, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}
