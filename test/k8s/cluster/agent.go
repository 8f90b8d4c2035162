package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/simnode"
)

// AgentSelector selects eniwire's agent pods (the DaemonSet's label).
const AgentSelector = "app.kubernetes.io/name=eniwire"

// AgentPod is the running agent pod on the node.
func (c *Cluster) AgentPod(ctx context.Context, node string) (*corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: AgentSelector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running eniwire agent pod on %s (%d pods)", node, len(pods.Items))
}

// Eniwirectl runs eniwirectl inside the node's agent pod (the image carries it), as an operator would with
// kubectl exec.
func (c *Cluster) Eniwirectl(ctx context.Context, node string, args ...string) (string, error) {
	pod, err := c.AgentPod(ctx, node)
	if err != nil {
		return "", err
	}
	return c.Kubectl(ctx, append([]string{"exec", "-n", "kube-system", pod.Name, "-c", "agent", "--", "eniwirectl"}, args...)...)
}

// AgentStatus is `eniwirectl status --output json` on the node.
func (c *Cluster) AgentStatus(ctx context.Context, node string) (*api.Status, error) {
	out, err := c.Eniwirectl(ctx, node, "status", "--output", "json")
	if err != nil {
		return nil, err
	}
	var view struct {
		Status *api.Status `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil || view.Status == nil {
		return nil, fmt.Errorf("decoding eniwirectl status: %v: %s", err, out)
	}
	return view.Status, nil
}

// Books lines up the node agent's ENIs with EC2's ENIs of its instance.
func (c *Cluster) Books(ctx context.Context, n *Node) (simnode.Books, error) {
	st, err := c.AgentStatus(ctx, n.Name)
	if err != nil {
		return simnode.Books{}, err
	}
	return simnode.LineUpBooks(n.Instance.ID, st.ENIs, c.Sim.Snapshot().ENIs), nil
}
