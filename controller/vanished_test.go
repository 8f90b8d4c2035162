package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
)

// TestAssignmentsOfPodsWhoseNetnsVanishedAreReleased: a node reboot or a runtime that lost its state leaves
// assignments no DEL will ever release. The agent notices that an assignment's network namespace is gone
// and, after a grace period, releases it; assignments whose namespace exists stay.
func TestAssignmentsOfPodsWhoseNetnsVanishedAreReleased(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	netns := filepath.Join(t.TempDir(), "netns")
	if err := os.MkdirAll(netns, 0o755); err != nil {
		t.Fatal(err)
	}
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	for _, cid := range []string{"alive", "vanished"} {
		path := filepath.Join(netns, cid)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "assigning "+cid, func() error {
			_, err := r.node.Assign(context.Background(), api.AssignRequest{
				Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}, Netns: path})
			return err
		})
	}
	if err := os.Remove(filepath.Join(netns, "vanished")); err != nil {
		t.Fatal(err)
	}
	gone := w.clk.Now()
	eventually(t, 30*time.Second, "the vanished pod's assignment released", func() error {
		if r.node.Snapshot().Assignment("vanished", "eth0") != nil {
			return fmt.Errorf("still assigned after %s", w.clk.Since(gone).Round(time.Second))
		}
		return nil
	})
	if took := w.clk.Since(gone); took < time.Minute {
		t.Errorf("released %s after its netns vanished: within the grace period", took.Round(time.Second))
	}
	if r.node.Snapshot().Assignment("alive", "eth0") == nil {
		t.Fatal("the assignment of a pod whose netns exists was released")
	}
}

// TestAPodWhoseNetnsPathIsRelativeIsNotJudgedVanished: CNI_NETNS may be relative to the runtime's working
// directory, which the agent does not know: resolved against the agent's own, such a path names nothing,
// although the pod lives. The agent cannot judge it, so it keeps the assignment.
func TestAPodWhoseNetnsPathIsRelativeIsNotJudgedVanished(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	// Relative to the directory the runtime ran the plugin in; the agent's (the test's) has no such file.
	relative := "cni-netns-of-a-live-pod"
	if _, err := os.Stat(relative); err == nil {
		t.Fatalf("%s exists in the test's working directory; the test would prove nothing", relative)
	}
	eventually(t, 30*time.Second, "assigning the pod", func() error {
		_, err := r.node.Assign(context.Background(), api.AssignRequest{
			Attachment: api.Attachment{ContainerID: "live", IfName: "eth0"}, Netns: relative})
		return err
	})
	w.passVirtual(6*time.Minute, func() { // three times the default grace
		if r.node.Snapshot().Assignment("live", "eth0") == nil {
			t.Fatalf("the assignment of a pod whose netns path %q is relative was released as vanished", relative)
		}
	})
}
