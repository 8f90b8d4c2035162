// Package cri runs eniwire under containerd's CRI as kubelet would: Debian's containerd and runc, started with
// their own root, state and socket inside a namespace that plays the node, a locally built pause image, and
// eniwire's conflist. crictl drives pod sandboxes.
package cri

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ociimage"
)

// PauseImage is the name the pause image is imported under and containerd's sandbox_image.
const PauseImage = "localhost/eniwire-pause:test"

// Containerd is one running containerd with the CRI plugin.
type Containerd struct {
	Dir    string
	Socket string
	cmd    *exec.Cmd
	log    *os.File
}

// Options say where the CNI plugins and conflist are.
type Options struct {
	BinDir  string
	ConfDir string
}

// ContainerdConfig is a containerd configuration with its own root, state and sockets under dir, the CRI's
// sandbox image, and the CNI dirs it invokes plugins from. restrict_oom_score_adj: lowering oom_score_adj
// needs CAP_SYS_RESOURCE, which this kind of machine withholds.
func ContainerdConfig(dir, sandboxImage, binDir, confDir string) []byte {
	return fmt.Appendf(nil, configTemplate, dir, sandboxImage, binDir, confDir)
}

const configTemplate = `version = 2
root = "%[1]s/root"
state = "%[1]s/state"
[grpc]
  address = "%[1]s/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd.sock.ttrpc"
[debug]
  address = "%[1]s/debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[3]s"
    conf_dir = "%[4]s"
    max_conf_num = 1
`

// StartContainerd writes the config and starts containerd with its thread inside node, so the CRI's CNI calls
// (and the host veths) happen in node. It stops when the test ends.
func StartContainerd(t testing.TB, node ns.NetNS, opts Options) *Containerd {
	t.Helper()
	dir, err := os.MkdirTemp("", "eniwire-cri-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Containerd{Dir: dir, Socket: dir + "/containerd.sock"}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, ContainerdConfig(dir, PauseImage, opts.BinDir, opts.ConfDir), 0o644); err != nil {
		t.Fatal(err)
	}
	c.log, err = os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command("containerd", "--config", cfg)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := node.Do(func(ns.NetNS) error { return c.cmd.Start() }); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	t.Cleanup(func() { c.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Ctr("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not come up; log:\n%s", c.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

func (c *Containerd) stop(t testing.TB) {
	// Sandboxes first, so their shims and mounts go with them.
	_, _ = c.Crictl("rmp", "--all", "--force")
	_ = c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	_ = c.log.Close()
	_ = exec.Command("umount", "-R", "-l", c.Dir+"/state").Run()
	_ = exec.Command("umount", "-R", "-l", c.Dir+"/root").Run()
	if !t.Failed() {
		_ = os.RemoveAll(c.Dir)
	} else {
		t.Logf("containerd dir kept for inspection: %s", c.Dir)
	}
}

// Log returns containerd's output so far.
func (c *Containerd) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	return string(b)
}

// Ctr runs ctr against this containerd in the k8s.io namespace.
func (c *Containerd) Ctr(args ...string) (string, error) {
	return run("ctr", append([]string{"--address", c.Socket, "--namespace", "k8s.io"}, args...)...)
}

// Crictl runs crictl against this containerd's CRI.
func (c *Containerd) Crictl(args ...string) (string, error) {
	return run("crictl", append([]string{"--runtime-endpoint", "unix://" + c.Socket, "--timeout", "60s"}, args...)...)
}

func run(name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// ImportPause takes the run's pause binary (or builds it), packs it as a one-layer image in docker-save layout and imports it.
func (c *Containerd) ImportPause(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	bin := testenv.Binary(t, "pause", "github.com/eniwire/eniwire/test/cri/pause")
	tarball := filepath.Join(dir, "pause.tar")
	pause, err := ociimage.FromBinary(bin, "/pause")
	if err != nil {
		t.Fatal(err)
	}
	if err := (ociimage.Image{Tags: []string{PauseImage}, Files: []ociimage.File{pause}, Entrypoint: []string{"/pause"}}).WriteArchive(tarball); err != nil {
		t.Fatalf("packing pause image: %v", err)
	}
	if out, err := c.Ctr("images", "import", tarball); err != nil {
		t.Fatalf("importing pause image: %v\n%s", err, out)
	}
}

// Sandbox is a pod sandbox crictl ran.
type Sandbox struct {
	ID    string
	Netns string
	IP    string
}

// PortMapping is a TCP hostPort of a pod sandbox, which the CRI hands to the CNI chain's portMappings.
type PortMapping struct {
	HostPort, ContainerPort int
}

// RunPod runs a sandbox for namespace/name with the given host ports and returns its id, netns path and IP as
// the CRI reports them.
func (c *Containerd) RunPod(t testing.TB, namespace, name string, ports ...PortMapping) Sandbox {
	t.Helper()
	var pms []map[string]any
	for _, p := range ports {
		// protocol 0 is TCP in the CRI's enum.
		pms = append(pms, map[string]any{"protocol": 0, "host_port": p.HostPort, "container_port": p.ContainerPort})
	}
	spec, _ := json.Marshal(map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": namespace, "uid": "uid-" + name, "attempt": 0},
		"log_directory": filepath.Join(c.Dir, "logs", name),
		"linux":         map[string]any{},
		"port_mappings": pms,
	})
	specFile := filepath.Join(c.Dir, name+".json")
	if err := os.WriteFile(specFile, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.Crictl("runp", specFile)
	if err != nil {
		t.Fatalf("crictl runp %s: %v\ncontainerd log:\n%s", name, err, tail(c.Log(), 40))
	}
	id := strings.TrimSpace(out)
	raw, err := c.Crictl("inspectp", "--output", "json", id)
	if err != nil {
		t.Fatalf("crictl inspectp: %v", err)
	}
	var insp struct {
		Status struct {
			Network struct {
				IP string `json:"ip"`
			} `json:"network"`
		} `json:"status"`
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					Namespaces []struct {
						Type string `json:"type"`
						Path string `json:"path"`
					} `json:"namespaces"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(raw), &insp); err != nil {
		t.Fatalf("decoding inspectp: %v", err)
	}
	sb := Sandbox{ID: id, IP: insp.Status.Network.IP}
	for _, n := range insp.Info.RuntimeSpec.Linux.Namespaces {
		if n.Type == "network" {
			sb.Netns = n.Path
		}
	}
	return sb
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
