package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/eniwire/eniwire/test/simnode"
)

// bins are the agent, plugin and eniwirectl every node of the package's tests runs: the run's prebuilt ones,
// or built once here.
var bins simnode.Binaries

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var remove func()
	var err error
	if bins, remove, err = simnode.BuildTemp(context.Background(), "eniwire-e2e-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	return m.Run()
}
