package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// helm renders deploy/helm/eniwire with Helm's own engine (the library `helm install` uses), with the
// same test settings as the overlay, applies it, and runs a pod on every node: the chart installs a
// working eniwire. Then it uninstalls again.
func (s *suite) helm(t *testing.T) string {
	ctx := context.Background()
	rendered, err := renderChart(s.c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.c.Dir, "helm-rendered.yaml")
	if err := os.WriteFile(path, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := s.c.Kubectl(ctx, "apply", "-n", "kube-system", "-f", path); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := waitPodsReady(ctx, s.c, "kube-system", cluster.AgentSelector, len(s.c.Nodes), 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	reached := 0
	for i, n := range s.c.Nodes {
		name := fmt.Sprintf("helm%d", i+1)
		mustCreate(t, name, s.c.Client.CoreV1().Pods(ns).Create, pod(name, n.Name, 0))
		pods, err := waitPodsReady(ctx, s.c, ns, "app="+name, 1, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		checkPodAddresses(t, s.c, n, pods)
		if resp, err := fromVPCHost(ctx, s.c, pods[0].Status.PodIP+":8080"); err != nil || resp != name {
			t.Errorf("pod %s on %s from the VPC host: %q %v", name, short(n.Name), resp, err)
		} else {
			reached++
		}
	}
	took := time.Since(start)
	s.deleteWorkloads(t)
	if out, err := s.c.Kubectl(ctx, "delete", "-n", "kube-system", "-f", path, "--wait=true", "--timeout=2m"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, n := range s.c.Nodes {
		if left := s.uninstallNode(t, n); len(left) > 0 {
			t.Errorf("after the Helm uninstall: %s", strings.Join(left, "; "))
		}
	}
	return fmt.Sprintf("rendered %d objects; agents and nodes Ready, a pod per node reached from the VPC host (%d/%d) in %.0fs",
		strings.Count(rendered, "\nkind: ")+strings.Count(rendered, "---\nkind: "), reached, len(s.c.Nodes), took.Seconds())
}

// renderChart renders the chart as `helm template` would, with the test cluster's values.
func renderChart(c *cluster.Cluster) (string, error) {
	chart, err := loader.Load(filepath.Join(c.RepoRoot, "deploy", "helm", "eniwire"))
	if err != nil {
		return "", fmt.Errorf("loading the chart: %w", err)
	}
	values := map[string]any{
		"image": map[string]any{"tag": "k8s-test"},
		"settings": map[string]any{
			"CLUSTER_NAME": c.Name, "AWS_REGION": c.Sim.Config().Region, "AWS_ENDPOINT_URL_EC2": vpcfabric.EC2URL,
			"AWS_ACCESS_KEY_ID": ec2sim.TestAccessKey, "AWS_SECRET_ACCESS_KEY": ec2sim.TestSecretKey,
		},
	}
	rv, err := chartutil.ToRenderValues(chart, values, chartutil.ReleaseOptions{Name: "eniwire", Namespace: "kube-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return "", fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(chart, rv)
	if err != nil {
		return "", fmt.Errorf("rendering the chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(files[name]) != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "---\n# %s\n%s\n", name, files[name])
	}
	return b.String(), nil
}
