package cri

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/cnitest"
)

// cniDirs builds the plugin and lays out a bin dir (eniwire plus Debian's loopback, which containerd's CRI
// runs for lo, and portmap) and a conf dir holding the shipped conflist pointed at socket.
func cniDirs(t *testing.T, socket string) Options {
	t.Helper()
	bin, conf := t.TempDir(), t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "eniwire"), "github.com/eniwire/eniwire/cmd/eniwire")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	for _, p := range []string{"loopback", "portmap"} {
		if err := os.Symlink("/usr/lib/cni/"+p, filepath.Join(bin, p)); err != nil {
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
	const nodeIP = "10.218.255.1"
	node := cnitest.NewNode(t, nodeIP)
	agent := cnitest.StartAgentDouble(t, node, []string{"10.218.0.10", "10.218.0.11", "10.218.0.12"})
	opts := cniDirs(t, agent.Socket)
	ctrd := StartContainerd(t, node, opts)
	ctrd.ImportPause(t)

	a := ctrd.RunPod(t, "cri-test", "pod-a")
	b := ctrd.RunPod(t, "cri-test", "pod-b")
	if a.IP == "" || b.IP == "" || a.IP == b.IP {
		t.Fatalf("CRI reports pod IPs %q and %q, want two distinct addresses", a.IP, b.IP)
	}
	if got := len(agent.Assignments()); got != 2 {
		t.Fatalf("agent holds %d assignments after two runp, want 2", got)
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

	for _, sb := range []Sandbox{a, b} {
		if out, err := ctrd.Crictl("stopp", sb.ID); err != nil {
			t.Fatalf("crictl stopp: %v %s", err, out)
		}
		if out, err := ctrd.Crictl("rmp", sb.ID); err != nil {
			t.Fatalf("crictl rmp: %v %s", err, out)
		}
	}
	if as := agent.Assignments(); len(as) != 0 {
		t.Errorf("assignments left after stopp/rmp: %+v", as)
	}
	if links := cnitest.Links(t, node, plumbing.HostVethPrefix); len(links) != 0 {
		t.Errorf("host veths left after stopp/rmp: %v", links)
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
