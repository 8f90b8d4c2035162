package cnitest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/internal/testenv"
)

// cnitool runs `cnitool <cmd> <network> <netns>` from inside node.
func cnitool(t *testing.T, node ns.NetNS, confDir, cmd, network string, pod ns.NetNS, podName string) (string, error) {
	t.Helper()
	c := exec.Command(testenv.RequireTool(t, "cnitool"), cmd, network, pod.Path())
	c.Env = append(os.Environ(), "NETCONFPATH="+confDir, "CNI_PATH="+pluginDir+":"+debianPluginDir,
		"CNI_IFNAME=eth0", "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=cnitool;K8S_POD_NAME="+podName)
	var out []byte
	err := inNode(t, node, func() (err error) { out, err = c.CombinedOutput(); return err })
	if err != nil {
		return string(out), fmt.Errorf("cnitool %s %s: %w: %s", cmd, podName, err, out)
	}
	return string(out), nil
}

// TestCnitoolAddsChecksAndDeletesSeveralPods drives the built plugin with cnitool against the agent double.
// The same flow against the real agent and test/ec2sim waits for cmd/eniwire-agent to build.
func TestCnitoolAddsChecksAndDeletesSeveralPods(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "cnitool")
	node := NewNode(t, "10.219.255.1")
	agent := StartAgentDouble(t, node, []string{"10.219.0.10", "10.219.0.11", "10.219.0.12"})
	list := deployConflist(t, agent.Socket, "1.0.0", false)
	confDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confDir, "10-eniwire.conflist"), list.Bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	pods := map[string]ns.NetNS{"one": NewNS(t), "two": NewNS(t), "three": NewNS(t)}
	for name, pod := range pods {
		out, err := cnitool(t, node, confDir, "add", list.Name, pod, name)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			IPs []struct{ Address string } `json:"ips"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) != 1 {
			t.Fatalf("cnitool add %s printed %s (%v)", name, out, err)
		}
		if _, err := cnitool(t, node, confDir, "check", list.Name, pod, name); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(agent.Assignments()); got != 3 {
		t.Fatalf("agent holds %d assignments, want 3", got)
	}
	for name, pod := range pods {
		if _, err := cnitool(t, node, confDir, "del", list.Name, pod, name); err != nil {
			t.Fatal(err)
		}
	}
	if as := agent.Assignments(); len(as) != 0 {
		t.Errorf("assignments left after del: %+v", as)
	}
	if links := Links(t, node, plumbing.HostVethPrefix); len(links) != 0 {
		t.Errorf("host veths left after del: %v", links)
	}
}
