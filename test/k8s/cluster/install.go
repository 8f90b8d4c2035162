package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// overlayTemplate is the test overlay of deploy/manifests, the only thing the test cluster changes: the
// image's tag (the image is built locally from the Dockerfile's layout), the cluster's name, and where the
// simulated AWS is (the EC2 endpoint and its credentials; IMDS is where it is on EC2), and the settings the
// cluster's IP family needs (Family.AgentEnv).
const overlayTemplate = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
%[1]s
images:
  - name: ghcr.io/eniwire/eniwire
    newTag: %[2]s
patches:
  - target: {kind: DaemonSet, name: eniwire}
    patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: eniwire, namespace: kube-system}
      spec:
        template:
          spec:
            containers:
              - name: agent
                env:
                  - {name: CLUSTER_NAME, value: %[3]s}
                  - {name: AWS_REGION, value: %[4]s}
                  - {name: AWS_ENDPOINT_URL_EC2, value: "%[5]s"}
                  - {name: AWS_ACCESS_KEY_ID, value: %[6]s}
                  - {name: AWS_SECRET_ACCESS_KEY, value: %[7]s}%[8]s
`

// WriteOverlay copies deploy/manifests into dir and writes the kustomization that overlays them for tag.
func (c *Cluster) WriteOverlay(dir, tag string) error {
	src := filepath.Join(c.RepoRoot, "deploy", "manifests")
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading deploy/manifests: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		return err
	}
	var resources strings.Builder
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "manifests", e.Name()), b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&resources, "  - manifests/%s\n", e.Name())
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), fmt.Appendf(nil, overlayTemplate,
		strings.TrimRight(resources.String(), "\n"), tag, c.Name, c.Sim.Config().Region, vpcfabric.EC2URL,
		ec2sim.TestAccessKey, ec2sim.TestSecretKey, familyEnv(c.Family)), 0o644)
}

// familyEnv is the overlay's env entries for the family's agent settings, sorted.
func familyEnv(f Family) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(f.AgentEnv)) {
		fmt.Fprintf(&b, "\n                  - {name: %s, value: %q}", name, f.AgentEnv[name])
	}
	return b.String()
}

// InstallEniwire applies deploy/manifests through the test overlay with `kubectl apply -k`, as a user
// installs eniwire, with the image tag given.
func (c *Cluster) InstallEniwire(ctx context.Context, tag string) error {
	dir := filepath.Join(c.Dir, "overlay-"+tag)
	if err := c.WriteOverlay(dir, tag); err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "-k", dir); err != nil {
		return fmt.Errorf("kubectl apply -k: %w: %s", err, out)
	}
	return nil
}

// waitNodesRegistered waits until every node has registered with the API server.
func (c *Cluster) waitNodesRegistered(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if err := c.waitRegistered(wctx, n); err != nil {
			return err
		}
	}
	return nil
}

// waitRegistered waits until the node has registered with the API server, or its kubelet exits.
func (c *Cluster) waitRegistered(ctx context.Context, n *Node) error {
	return waitFor(ctx, "node "+n.Name+" to register", n.kubelet, func() error {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err
	})
}

// NodeReady says whether the node's Ready condition is True, and its message.
func (c *Cluster) NodeReady(ctx context.Context, name string) (bool, string, error) {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, cond.Message, nil
		}
	}
	return false, "no Ready condition", nil
}

// WaitNodesReady waits until every node is Ready.
func (c *Cluster) WaitNodesReady(ctx context.Context, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, n := range c.Nodes {
		if err := waitFor(wctx, "node "+n.Name+" Ready", n.kubelet, func() error {
			ok, msg, err := c.NodeReady(wctx, n.Name)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("not ready: %s", msg)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
