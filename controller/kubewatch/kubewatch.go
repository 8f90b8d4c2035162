// Package kubewatch holds what the agent's watches of the Kubernetes API share (the NetworkPolicy watch,
// controller/policywatch, and the SecurityGroupPolicy watch, controller/podsg): how a runtime's pod is
// matched with the API's, the Event recorder, and the key of an informer's object.
package kubewatch

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// MirrorAnnotation marks the API's copy of a static pod, whose UID is not the one kubelet gives the runtime.
const MirrorAnnotation = "kubernetes.io/config.mirror"

// SameUID reports whether p is the pod the runtime names by uid: any, when uid is empty; a static pod's
// mirror, whatever its UID.
func SameUID(p *corev1.Pod, uid types.UID) bool {
	_, mirror := p.Annotations[MirrorAnnotation]
	return uid == "" || p.UID == uid || mirror
}

// NewRecorder writes Events to the API server as eniwire-agent on node.
func NewRecorder(ctx context.Context, client kubernetes.Interface, node string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "eniwire-agent", Host: node})
}

// Key is an informer object's namespace and name, a deleted one's (its tombstone) too; ok false for
// anything that has neither.
func Key(obj any) (namespace, name string, ok bool) {
	if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = t.Obj
	}
	m, ok := obj.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return "", "", false
	}
	return m.GetNamespace(), m.GetName(), true
}
