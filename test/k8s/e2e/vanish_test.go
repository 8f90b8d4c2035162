package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// releasedLine is what the agent logs when it releases the assignment of a pod whose namespace vanished.
const releasedLine = "released the assignment of a pod whose network namespace is gone"

// vanishedNetns: a pod's network namespace disappears without a DEL, as after a node reboot or a runtime
// that lost its state (the runtime's bind mount of it is unmounted and its file removed; the pod keeps
// running and the kubelet does not notice). The agent, which sees the runtime's namespaces through its
// HostToContainer mount of /var/run/netns, releases that one assignment after its grace, and only that
// one: every other assignment of node 1 and node 2 stays as it was, which proves that the mount shows the
// namespaces the runtime made (an agent that saw an empty directory would release them all). Deleting the
// pod afterwards must still succeed: its DEL meets a namespace that is gone and an agent with no record.
func (s *suite) vanishedNetns(t *testing.T) string {
	ctx := context.Background()
	const name = "vanish"
	core := s.c.Client.CoreV1().Pods(ns)
	mustCreate(t, name, core.Create, pod(name, s.node1.Name, 0))
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = core.Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	if _, err := waitPodsReady(ctx, s.c, ns, "app="+name, 1, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	before1, err := assignments(ctx, s.c, s.node1)
	if err != nil {
		t.Fatal(err)
	}
	var mine api.Assignment
	for _, a := range before1 {
		if a.Pod.Namespace == ns && a.Pod.Name == name {
			mine = a
		}
	}
	if mine.ContainerID == "" || mine.Netns == "" {
		t.Fatalf("node 1's agent holds no assignment with a network namespace for %s/%s: %+v", ns, name, before1)
	}
	before2, err := assignments(ctx, s.c, s.node2)
	if err != nil {
		t.Fatal(err)
	}
	released1, err1 := vanishedReleased(ctx, s.node1)
	released2, err2 := vanishedReleased(ctx, s.node2)
	if err1 != nil || err2 != nil {
		t.Fatalf("reading eniwire_vanished_pods_released_total: node 1: %v; node 2: %v", err1, err2)
	}

	// The namespace goes as a reboot or a runtime that lost its state takes it: its bind mount and its file,
	// on the node (in the node's mount namespace), with no DEL.
	script := `set -e; test -e "$1"; umount "$1"; rm "$1"; ! test -e "$1"; test -d "$(dirname "$1")"`
	if out, err := s.node1.NS().Command(ctx, "sh", "-c", script, "sh", mine.Netns).CombinedOutput(); err != nil {
		t.Fatalf("removing %s on node 1: %v: %s", mine.Netns, err, out)
	}
	removed := time.Now()

	// The agent checks every 30 s and releases after a 2-minute grace: between 2 and 3 minutes.
	var after1 []api.Assignment
	lastNote := removed
	for {
		after1, err = assignments(ctx, s.c, s.node1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(after1, func(a api.Assignment) bool { return a.Attachment == mine.Attachment }) {
			break
		}
		if time.Since(removed) > 3*time.Minute+30*time.Second {
			t.Fatalf("%s's assignment (%s) still held %s after its network namespace %s was removed", name, mine.IP,
				time.Since(removed).Round(time.Second), mine.Netns)
		}
		if time.Since(lastNote) >= 30*time.Second {
			lastNote = time.Now()
			fmt.Printf("k8s-e2e: %s 4e: %s after the removal of %s, node 1's agent still holds %s for %s (%d assignments)\n",
				time.Now().Format("15:04:05"), time.Since(removed).Round(time.Second), mine.Netns, mine.IP, name, len(after1))
		}
		time.Sleep(2 * time.Second)
	}
	took := time.Since(removed)
	if took < 2*time.Minute {
		t.Errorf("released %s after %s, before the 2-minute grace", mine.IP, took.Round(time.Second))
	}

	kept1 := keptAssignments(t, "node 1", before1, after1, mine.Attachment)
	after2, err := assignments(ctx, s.c, s.node2)
	if err != nil {
		t.Fatal(err)
	}
	kept2 := keptAssignments(t, "node 2", before2, after2, api.Attachment{})
	if now1, err := vanishedReleased(ctx, s.node1); err != nil || now1 != released1+1 {
		t.Errorf("node 1's eniwire_vanished_pods_released_total: %v then %v (%v), want one more", released1, now1, err)
	}
	if now2, err := vanishedReleased(ctx, s.node2); err != nil || now2 != released2 {
		t.Errorf("node 2's eniwire_vanished_pods_released_total: %v then %v (%v), want no change", released2, now2, err)
	}
	if err := agentLogged(ctx, s.c, s.node1, releasedLine, mine.ContainerID); err != nil {
		t.Error(err)
	}
	if err := agentLogged(ctx, s.c, s.node2, releasedLine, ""); err == nil {
		t.Errorf("node 2's agent logged %q", releasedLine)
	}
	ipState, err := s.ipState(ctx, s.node1, mine.IP)
	if err != nil {
		t.Error(err)
	}
	if bpf, err := bpfPodIPs(ctx, s.node1); err != nil {
		t.Error(err)
	} else if bpf[mine.IP] {
		t.Errorf("%s is still in node 1's BPF pod map after its release", mine.IP)
	}

	// The pod is deleted: its DEL meets a namespace that is gone and an agent that holds nothing, and must
	// succeed, or the runtime keeps the sandbox and the pod never goes.
	if err := core.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		_, err := core.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			deleted = true
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not gone 2 minutes after its deletion (%v)", name, err)
		}
	}
	if err := pluginDeleted(s.node1, mine.ContainerID); err != nil {
		t.Error(err)
	}
	final1, err := assignments(ctx, s.c, s.node1)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range final1 {
		if a.Attachment == mine.Attachment || a.Pod.Namespace == ns && a.Pod.Name == name || a.IP == mine.IP {
			t.Errorf("after the deletion node 1's agent holds %+v", a)
		}
	}
	return fmt.Sprintf("netns of %s removed; released after %s; %d other assignments kept on node 1, %d on node 2; IP %s; pod deleted cleanly",
		name, took.Round(time.Second), kept1, kept2, ipState)
}

// assignments are `eniwirectl pods` of the node's agent.
func assignments(ctx context.Context, c *cluster.Cluster, n *cluster.Node) ([]api.Assignment, error) {
	out, err := c.Eniwirectl(ctx, n.Name, "pods", "--output", "json")
	if err != nil {
		return nil, err
	}
	var as []api.Assignment
	if err := json.Unmarshal([]byte(out), &as); err != nil {
		return nil, fmt.Errorf("decoding eniwirectl pods of %s: %v: %s", short(n.Name), err, out)
	}
	return as, nil
}

// keptAssignments asserts that after holds every assignment of before, unchanged, except the one of
// released (which it must not hold), and nothing else; it returns how many were kept.
func keptAssignments(t *testing.T, node string, before, after []api.Assignment, released api.Attachment) int {
	t.Helper()
	now := map[api.Attachment]api.Assignment{}
	for _, a := range after {
		now[a.Attachment] = a
	}
	kept := 0
	for _, a := range before {
		if a.Attachment == released {
			continue
		}
		b, ok := now[a.Attachment]
		same := b.AssignedAt.Equal(a.AssignedAt)
		b.AssignedAt = a.AssignedAt
		switch {
		case !ok:
			t.Errorf("%s: the assignment of %s/%s (%s, netns %s) was released", node, a.Pod.Namespace, a.Pod.Name, a.IP, a.Netns)
		case !same || b != a:
			b.AssignedAt = now[a.Attachment].AssignedAt
			t.Errorf("%s: the assignment of %s/%s changed: %+v, then %+v", node, a.Pod.Namespace, a.Pod.Name, a, b)
		default:
			kept++
		}
		delete(now, a.Attachment)
	}
	for _, b := range now {
		t.Errorf("%s: a new assignment appeared meanwhile: %+v", node, b)
	}
	return kept
}

// vanishedReleased reads eniwire_vanished_pods_released_total from the node's agent.
func vanishedReleased(ctx context.Context, n *cluster.Node) (float64, error) {
	body, err := get(ctx, n.Netns.NetnsPath, "http://127.0.0.1:61678/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "eniwire_vanished_pods_released_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s's agent has no eniwire_vanished_pods_released_total", short(n.Name))
}

// agentLogged finds a line of the node's agent log holding msg and, when not empty, also.
func agentLogged(ctx context.Context, c *cluster.Cluster, n *cluster.Node, msg, also string) error {
	agent, err := c.AgentPod(ctx, n.Name)
	if err != nil {
		return err
	}
	out, err := c.Kubectl(ctx, "logs", "-n", "kube-system", agent.Name, "-c", "agent")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, msg) && strings.Contains(line, also) {
			return nil
		}
	}
	return fmt.Errorf("%s's agent log has no line %q with %q", short(n.Name), msg, also)
}

// ipState says where a released IP is: on an ENI of the node (in cooldown or warm) or given back to EC2.
func (s *suite) ipState(ctx context.Context, n *cluster.Node, ip string) (string, error) {
	st, err := s.c.AgentStatus(ctx, n.Name)
	if err != nil {
		return "", err
	}
	for _, e := range st.ENIs {
		if slices.Contains(e.IPs, ip) {
			return fmt.Sprintf("%s back on %s (%d in cooldown, %d warm)", ip, e.ID, e.Cooldown, e.Warm), nil
		}
	}
	return ip + " given back to EC2", nil
}

// pluginDeleted finds the plugin's DEL of the container in the node's plugin log, ended without an error,
// and no failed teardown of its network in containerd's log.
func pluginDeleted(n *cluster.Node, containerID string) error {
	for _, p := range n.Processes() {
		if p.Name != "containerd" {
			continue
		}
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "failed to destroy network") && strings.Contains(line, containerID) {
				return fmt.Errorf("containerd on %s: %s", short(n.Name), line)
			}
		}
	}
	path := filepath.Join(n.Mount.Root, "var/log/eniwire/plugin.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, containerID) && strings.Contains(line, `"DEL"`) {
			lines = append(lines, line)
		}
	}
	for _, line := range lines {
		if strings.Contains(line, `"level":"ERROR"`) {
			return fmt.Errorf("the plugin's DEL of %s failed: %s", containerID, line)
		}
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "pod unwired") }) {
		return fmt.Errorf("%s holds no finished DEL of %s (%d lines of it)", path, containerID, len(lines))
	}
	return nil
}
