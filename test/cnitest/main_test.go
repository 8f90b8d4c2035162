package cnitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pluginDir holds the eniwire binary built from this tree for the whole package run.
var pluginDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "eniwire-cnitest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "making bin dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "eniwire"), "github.com/eniwire/eniwire/cmd/eniwire")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the plugin: %v\n%s", err, out)
		return 1
	}
	pluginDir = dir
	// portmap and containerd find iptables and runc there.
	_ = os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	return m.Run()
}
