package cnitest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/internal/testenv"
)

// execPlugin runs the built binary from inside node with the given environment and stdin, as a runtime does.
func execPlugin(t *testing.T, node ns.NetNS, env map[string]string, stdin string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(pluginDir, "eniwire"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if doErr := node.Do(func(ns.NetNS) error { err = cmd.Run(); return nil }); doErr != nil {
		t.Fatalf("entering node: %v", doErr)
	}
	return o.String(), e.String(), err
}

func TestBadInputGetsAClearCNIErrorAndLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	node := NewNode(t, "10.214.255.1")
	agent := StartAgent(t, node, AgentOptions{Binary: bins.Agent, SubnetCIDR: "10.214.0.0/20", WarmIPs: 2})
	pod := NewNS(t)
	good := func(mut func(map[string]any)) string {
		c := map[string]any{"cniVersion": "1.1.0", "name": "eniwire-test", "type": "eniwire", "agentSocket": agent.Socket}
		if mut != nil {
			mut(c)
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	env := func(mut func(map[string]string)) map[string]string {
		e := map[string]string{
			"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "bad-input", "CNI_NETNS": pod.Path(), "CNI_IFNAME": "eth0",
			"CNI_PATH": pluginDir, "CNI_ARGS": "K8S_POD_NAMESPACE=test;K8S_POD_NAME=bad-input",
		}
		if mut != nil {
			mut(e)
		}
		return e
	}
	tests := []struct {
		name     string
		env      map[string]string
		stdin    string
		wantCode uint
		wantMsg  string
	}{
		{"malformed JSON is a decoding failure", env(nil), `{"cniVersion": "1.1.0", "name": `, types.ErrDecodingFailure, "unmarshal"},
		{"a missing network name is an invalid config", env(nil), good(func(c map[string]any) { delete(c, "name") }), types.ErrInvalidNetworkConfig, "missing network name"},
		{"an unknown cniVersion is incompatible", env(nil), good(func(c map[string]any) { c["cniVersion"] = "9.9.9" }), types.ErrIncompatibleCNIVersion, "incompatible CNI versions"},
		{"a relative socket path is an invalid config", env(nil), good(func(c map[string]any) { c["agentSocket"] = "agent.sock" }), types.ErrInvalidNetworkConfig, "must be an absolute path"},
		{"a netns that does not exist is an invalid netns", env(func(e map[string]string) { e["CNI_NETNS"] = "/var/run/netns/eniwire-no-such-ns" }), good(nil), types.ErrInvalidNetNS, "does not exist"},
		{"an over-long ifname is an invalid variable", env(func(e map[string]string) { e["CNI_IFNAME"] = "eth0123456789abcdef" }), good(nil), types.ErrInvalidEnvironmentVariables, "interface name is too long"},
		{"garbage CNI_ARGS is an invalid variable", env(func(e map[string]string) { e["CNI_ARGS"] = "K8S_POD_NAME;;=x" }), good(nil), types.ErrInvalidEnvironmentVariables, "CNI_ARGS is malformed"},
		{"a missing container id is an invalid variable", env(func(e map[string]string) { delete(e, "CNI_CONTAINERID") }), good(nil), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"a missing agent socket means try again later", env(nil), good(func(c map[string]any) { c["agentSocket"] = "/run/eniwire-no-such-dir/agent.sock" }), types.ErrTryAgainLater, "not reachable at /run/eniwire-no-such-dir/agent.sock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := execPlugin(t, node, tc.env, tc.stdin)
			if err == nil {
				t.Fatalf("plugin succeeded; stdout %s", stdout)
			}
			var cniErr types.Error
			if jerr := json.Unmarshal([]byte(stdout), &cniErr); jerr != nil {
				t.Fatalf("stdout is not CNI error JSON: %v\n%s\nstderr: %s", jerr, stdout, stderr)
			}
			if cniErr.Code != tc.wantCode || !strings.Contains(cniErr.Msg+" "+cniErr.Details, tc.wantMsg) {
				t.Errorf("error = code %d %q (%q), want code %d mentioning %q", cniErr.Code, cniErr.Msg, cniErr.Details, tc.wantCode, tc.wantMsg)
			}
			if links := Links(t, node, plumbing.HostVethPrefix); len(links) != 0 {
				t.Errorf("host veths left behind: %v", links)
			}
			if links := Links(t, pod, "eth"); len(links) != 0 {
				t.Errorf("pod interfaces left behind: %v", links)
			}
			if as := agent.Assignments(t); len(as) != 0 {
				t.Errorf("assignments left behind: %+v", as)
			}
		})
	}
}
