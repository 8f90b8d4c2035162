package nodeready

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Nodes is what the reporter calls of the Kubernetes API's nodes, with the typed client's signatures: client-go's
// typed CoreV1().Nodes() satisfies it (the tests use its fake), and DynamicNodes serves it through the dynamic
// client the agent already carries for the ENIConfig watch (the typed clientset would add 20 MB to the binary).
type Nodes interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// DynamicNodes serves Nodes through client, converting the unstructured answers to corev1.Node.
func DynamicNodes(client dynamic.Interface) Nodes {
	return dynamicNodes{client.Resource(nodesResource)}
}

type dynamicNodes struct {
	r dynamic.NamespaceableResourceInterface
}

func (d dynamicNodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	l, err := d.r.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue()}}
	for i := range l.Items {
		n, err := toNode(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *n)
	}
	return out, nil
}

func (d dynamicNodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := d.r.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	// Bookmarks and errors (a metav1.Status) pass as they are; nodes become corev1.Node.
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if u, ok := e.Object.(*unstructured.Unstructured); ok && u.GetKind() == "Node" {
			if n, err := toNode(u); err == nil {
				e.Object = n
			}
		}
		return e, true
	}), nil
}

func (d dynamicNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	u, err := d.r.Patch(ctx, name, pt, data, opts, subresources...)
	if err != nil {
		return nil, err
	}
	return toNode(u)
}

func toNode(u *unstructured.Unstructured) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, n); err != nil {
		return nil, fmt.Errorf("reading node %s: %w", u.GetName(), err)
	}
	return n, nil
}
