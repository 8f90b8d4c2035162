package simnode

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
)

// NewForTest starts a node for one test: it needs root, ip, nft and bpftool (failing under CI=true,
// skipping elsewhere), names the node after the test's process unless opts.Name is set, and closes it (and
// reports what Close could not remove) when the test ends. With t.Failed it logs the agent's log tail.
func NewForTest(t testing.TB, opts Options) *Node {
	t.Helper()
	testenv.RequireRoot(t)
	for _, tool := range []string{"ip", "nft", "bpftool"} {
		testenv.RequireTool(t, tool)
	}
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("sn%d-%04x", os.Getpid(), time.Now().UnixNano()&0xffff)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("starting the simulated node: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && n.Agent != nil {
			t.Logf("agent log (tail):\n%s", n.Agent.LogTail(40))
		}
		if err := n.Close(); err != nil {
			t.Errorf("closing the simulated node: %v", err)
		}
	})
	return n
}
