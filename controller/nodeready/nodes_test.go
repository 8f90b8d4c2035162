package nodeready_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/eniwire/eniwire/controller/nodeready"
)

// The agent reaches the API through the dynamic client: its answers come back as corev1.Node, lists, watch
// events and patches alike.
func TestDynamicNodesAnswerTypedNodes(t *testing.T) {
	this, _ := registered()
	this.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
	nodes := nodeready.DynamicNodes(dynamicfake.NewSimpleDynamicClient(scheme.Scheme, this))
	ctx := context.Background()
	l, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || len(l.Items[0].Spec.Taints) != 2 {
		t.Fatalf("List = %+v, %v; want the node with its two taints", l, err)
	}
	w, err := nodes.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	patched, err := nodes.Patch(ctx, nodeName, types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/taints/1"}]`), metav1.PatchOptions{})
	if err != nil || len(patched.Spec.Taints) != 1 {
		t.Fatalf("Patch = %+v, %v; want one taint left", patched, err)
	}
	select {
	case e := <-w.ResultChan():
		if n, ok := e.Object.(*corev1.Node); !ok || len(n.Spec.Taints) != 1 {
			t.Errorf("watch event %s %T, want the patched *corev1.Node", e.Type, e.Object)
		}
	case <-time.After(5 * time.Second):
		t.Error("no watch event for the patch")
	}
}
