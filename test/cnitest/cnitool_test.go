package cnitest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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

// TestCnitoolAddsChecksAndDeletesSeveralPodsWithTheRealAgent drives the built plugin with cnitool against
// cmd/eniwire-agent, which gets its IPs from test/ec2sim and routes them to the pods' host veths.
func TestCnitoolAddsChecksAndDeletesSeveralPodsWithTheRealAgent(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "cnitool")
	node := NewNode(t, "10.219.255.1")
	agent := StartAgent(t, node, AgentOptions{Binary: bins.Agent, SubnetCIDR: "10.219.0.0/20", WarmIPs: 3})
	list := deployConflist(t, agent.Socket, "1.0.0", false)
	confDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confDir, "10-eniwire.conflist"), list.Bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	_, subnet, _ := net.ParseCIDR("10.219.0.0/20")
	names := []string{"one", "two", "three"}
	pods := map[string]ns.NetNS{}
	ips := map[string]string{}
	for _, name := range names {
		pods[name] = NewNS(t)
		out, err := cnitool(t, node, confDir, "add", list.Name, pods[name], name)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			IPs []struct{ Address string } `json:"ips"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) != 1 {
			t.Fatalf("cnitool add %s printed %s (%v)", name, out, err)
		}
		ip, _, err := net.ParseCIDR(res.IPs[0].Address)
		if err != nil || !subnet.Contains(ip) {
			t.Fatalf("cnitool add %s gave %q, want an address of the node's subnet %s", name, res.IPs[0].Address, subnet)
		}
		ips[name] = ip.String()
		if _, err := cnitool(t, node, confDir, "check", list.Name, pods[name], name); err != nil {
			t.Fatal(err)
		}
	}
	as := agent.Assignments(t)
	if len(as) != len(names) {
		t.Fatalf("agent holds %d assignments, want %d: %+v", len(as), len(names), as)
	}
	for _, a := range as {
		if a.ENI == "" || a.IP != ips[a.Pod.Name] {
			t.Errorf("agent's record %+v does not match the IP cnitool printed for %s (%s)", a, a.Pod.Name, ips[a.Pod.Name])
		}
	}
	// The agent's host routes carry pod -> pod through the node.
	addr := Serve(t, pods["two"], ips["two"], "two")
	if got, err := Fetch(pods["one"], addr); err != nil || got != "two" {
		t.Fatalf("pod one fetching %s = %q, %v", addr, got, err)
	}

	for _, name := range names {
		if _, err := cnitool(t, node, confDir, "del", list.Name, pods[name], name); err != nil {
			t.Fatal(err)
		}
	}
	if as := agent.Assignments(t); len(as) != 0 {
		t.Errorf("assignments left after del: %+v", as)
	}
	// The agent removes the host veths in the background after del.
	if links := LinksGone(t, node, plumbing.HostVethPrefix, 5*time.Second); len(links) != 0 {
		t.Errorf("host veths left 5s after del: %v", links)
	}
}
