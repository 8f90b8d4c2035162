package cniinstall

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// execCommand is exec.Command bounded by a deadline, so a hung build or plugin fails the test instead of
// hanging it.
func execCommand(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, name, args...)
}
