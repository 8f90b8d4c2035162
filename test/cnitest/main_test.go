package cnitest

import (
	"fmt"
	"os"
	"testing"
)

// bins are the plugin and agent built from this tree for the whole package run; pluginDir holds both.
var (
	bins      Binaries
	pluginDir string
)

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
	if bins, err = BuildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pluginDir = bins.Dir
	// portmap and containerd find iptables and runc there.
	_ = os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	return m.Run()
}
