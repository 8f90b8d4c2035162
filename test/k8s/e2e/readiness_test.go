package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readiness: before eniwire, every node is NotReady for want of a network plugin; after `kubectl apply -k`,
// each turns Ready only once its agent installed the conflist, and CoreDNS runs.
func (s *suite) readiness(t *testing.T) string {
	ctx := context.Background()
	for _, n := range s.c.Nodes {
		ready, msg, err := s.c.NodeReady(ctx, n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if ready {
			t.Fatalf("node %s is Ready before any network plugin is installed", n.Name)
		}
		if !strings.Contains(strings.ToLower(msg), "network") && !strings.Contains(strings.ToLower(msg), "cni") {
			t.Errorf("node %s NotReady for another reason than the network: %q", n.Name, msg)
		}
	}
	s.recordStartupTaints(ctx, t)
	installed := time.Now()
	if err := s.c.InstallEniwire(ctx, "k8s-test"); err != nil {
		t.Fatal(err)
	}
	if err := s.c.WaitNodesReady(ctx, 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	var figures []string
	for _, n := range s.c.Nodes {
		conflist, err := os.Stat(filepath.Join(n.Mount.Root, "etc/cni/net.d/10-eniwire.conflist"))
		if err != nil {
			t.Fatalf("node %s is Ready without eniwire's conflist: %v", n.Name, err)
		}
		node, err := s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var readySince time.Time
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				readySince = c.LastTransitionTime.Time
			}
		}
		// The condition's time has a resolution of one second.
		if readySince.Before(conflist.ModTime().Truncate(time.Second)) {
			t.Errorf("node %s turned Ready at %s, before the agent installed the conflist at %s", n.Name,
				readySince.Format(time.TimeOnly), conflist.ModTime().Format(time.TimeOnly))
		}
		figures = append(figures, fmt.Sprintf("%s: conflist %.1fs after the apply, Ready in the same second or later (%s)", short(n.Name),
			conflist.ModTime().Sub(installed).Seconds(), readySince.Format(time.TimeOnly)))
	}
	dns, err := waitPodsReady(ctx, s.c, "kube-system", "k8s-app=kube-dns", 2, 3*time.Minute)
	if err != nil {
		t.Fatalf("CoreDNS: %v", err)
	}
	return strings.Join(figures, "; ") + fmt.Sprintf("; CoreDNS %d/2 Running", len(dns))
}

// short is the node name's first label.
func short(node string) string { return strings.SplitN(node, ".", 2)[0] }
