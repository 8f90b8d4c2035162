package simworld

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/agent"
	"github.com/eniwire/eniwire/controller/api"
)

// readyWithin bounds every wait on the agent; the scaled clocks the tests use make a ready pool a matter of
// milliseconds, so this only ends a test that would otherwise hang.
const readyWithin = 20 * time.Second

// SocketPath returns a path for a unix socket in a fresh directory under the system temp dir, removed when
// tb ends. Socket paths are limited to 107 bytes, which a test's own TempDir can exceed, so the directory is
// short and named after the process to stay unique across parallel test binaries.
func SocketPath(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", fmt.Sprintf("eniwire-%d-", os.Getpid()))
	if err != nil {
		tb.Fatalf("creating socket directory: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "agent.sock")
}

// Serve runs node and its agent API on a unix socket, as the agent binary does, and returns once the node
// reports ready. When tb ends both stop and node is closed.
func Serve(tb testing.TB, node *controller.Node) (string, *api.Client) {
	tb.Helper()
	sock := SocketPath(tb)
	l, err := agent.ListenSocket(sock)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = node.Run(ctx); done <- struct{}{} }()
	go func() { _ = agent.Serve(ctx, l, agent.Handler(node, nil)); done <- struct{}{} }()
	tb.Cleanup(func() { cancel(); <-done; <-done; node.Close() })
	c := api.NewClient(sock)
	WaitStatus(tb, c, "ready", func(st *api.Status) bool { return st.Ready })
	return sock, c
}

// WaitStatus polls the agent's status until cond holds, and fails tb, naming what, if it does not within
// readyWithin.
func WaitStatus(tb testing.TB, c *api.Client, what string, cond func(*api.Status) bool) *api.Status {
	tb.Helper()
	deadline := time.Now().Add(readyWithin)
	for {
		st, err := c.Status(context.Background())
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			tb.Fatalf("agent not %s within %s: %+v %v", what, readyWithin, st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
