package cnitest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/eniwire/eniwire/test/simnode"
)

// bins are the plugin and agent built from this tree for the whole package run; pluginDir holds both.
var (
	bins      simnode.Binaries
	pluginDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var remove func()
	var err error
	if bins, remove, err = simnode.BuildTemp(context.Background(), "eniwire-cnitest-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	pluginDir = bins.Dir
	// portmap and containerd find iptables and runc there.
	_ = os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	return m.Run()
}
