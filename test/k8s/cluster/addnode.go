package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddNode joins one more node to the running cluster, as an autoscaler adds one: a new instance of the type
// in the cluster's subnet, started as Up starts its nodes (containerd, the kubelet with the max pods eniwire
// computes for the type with secondary IPs, kube-proxy in the cluster's current mode), registered with the
// API server. The DaemonSets place their pods on it; eniwire's agent starts on it with the DaemonSet's
// settings of the moment and a fresh pool.
func (c *Cluster) AddNode(ctx context.Context, instanceType string) (_ *Node, err error) {
	n, err := c.newInstance(ctx, instanceType)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.RemoveNode(context.Background(), n))
		}
	}()
	if err := c.startNode(ctx, n); err != nil {
		return n, fmt.Errorf("starting node %s: %w", n.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.waitRegistered(wctx, n); err != nil {
		return n, err
	}
	c.Nodes = append(c.Nodes, n)
	return n, nil
}

// RemoveNode takes a node out as scale-in does: its programs and pod sandboxes stop, its Node object is
// deleted (the pods still bound to it go with the pod garbage collector) and its instance is terminated,
// which deletes its delete-on-termination ENIs and, in the fabric, its network namespace.
func (c *Cluster) RemoveNode(ctx context.Context, n *Node) error {
	c.Nodes = slices.DeleteFunc(c.Nodes, func(x *Node) bool { return x == n })
	n.Stop(ctx)
	var errs []error
	if err := c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting node %s: %w", n.Name, err))
	}
	if err := c.Sim.TerminateInstance(n.Instance.ID); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
