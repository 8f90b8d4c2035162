package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// uninstall follows docs/operating.md's steps: the workloads go, the DaemonSet is deleted, and
// `eniwire-agent uninstall` runs on each node (with the node's own CNI dirs). Then no node holds a conflist,
// plugin, pin, tc program or nftables table of eniwire.
func (s *suite) uninstall(t *testing.T) string {
	ctx := context.Background()
	s.deleteWorkloads(t)
	if out, err := s.c.Kubectl(ctx, "delete", "-n", "kube-system", "daemonset/eniwire", "--wait=true", "--timeout=2m"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := waitPodsReady(ctx, s.c, "kube-system", cluster.AgentSelector, 0, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, n := range s.c.Nodes {
		left = append(left, s.uninstallNode(t, n)...)
	}
	if len(left) > 0 {
		t.Errorf("after the uninstall, eniwire's traces remain: %s", strings.Join(left, "; "))
	}
	return fmt.Sprintf("%d nodes: no conflist, plugin, pin, tc program or nftables table left", len(s.c.Nodes))
}

// uninstallNode runs the documented uninstall on n and lists what of eniwire is still on it.
func (s *suite) uninstallNode(t *testing.T, n *cluster.Node) []string {
	ctx := context.Background()
	cmd := n.NS().Command(ctx, filepath.Join(s.c.Bins.Eniwire, "eniwire-agent"), "uninstall")
	cmd.Env = append(os.Environ(), "ENIWIRE_CNI_BIN_DIR=/opt/cni/bin", "ENIWIRE_CNI_CONF_DIR=/etc/cni/net.d", "ENIWIRE_LOG_FORMAT=text")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("eniwire-agent uninstall on %s: %v: %s", short(n.Name), err, out)
	}
	var left []string
	for _, p := range []string{"etc/cni/net.d/10-eniwire.conflist", "opt/cni/bin/eniwire"} {
		if _, err := os.Stat(filepath.Join(n.Mount.Root, p)); err == nil {
			left = append(left, short(n.Name)+": /"+p)
		}
	}
	if out, err := n.NS().Command(ctx, "ls", "/sys/fs/bpf/eniwire").CombinedOutput(); err == nil {
		left = append(left, fmt.Sprintf("%s: /sys/fs/bpf/eniwire holds %q", short(n.Name), strings.TrimSpace(string(out))))
	}
	out, err := n.NS().Command(ctx, "bpftool", "-j", "net", "show").Output()
	if err != nil {
		t.Errorf("bpftool net show on %s: %v", short(n.Name), err)
	}
	if strings.Contains(string(out), "eniw") || strings.Contains(string(out), "from_pod") || strings.Contains(string(out), "to_pod") || strings.Contains(string(out), "to_vpc") {
		left = append(left, fmt.Sprintf("%s: tc programs: %s", short(n.Name), out))
	}
	if tables, err := n.NS().Command(ctx, "nft", "list", "tables").CombinedOutput(); err != nil || strings.Contains(string(tables), "eniwire") {
		left = append(left, fmt.Sprintf("%s: nftables: %s %v", short(n.Name), strings.TrimSpace(string(tables)), err))
	}
	return left
}

// deleteWorkloads removes the test's Deployments, pods and Services and waits until their pods are gone
// (each pod's CNI DEL runs while the agent still serves).
func (s *suite) deleteWorkloads(t *testing.T) {
	ctx := context.Background()
	// The test's namespace holds only the test's workloads.
	if err := s.c.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	svcs, _ := s.c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	for _, svc := range svcs.Items {
		if svc.Name != "kubernetes" {
			_ = s.c.Client.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{})
		}
	}
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		pods, err := s.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the test's pods did not go within 2 minutes (%d left)", len(pods.Items))
		}
	}
}
