package podsg

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller/kubewatch"
)

// slim is the informers' transform: an object keeps only what the selection reads, before the store holds
// it. The ServiceAccounts of every namespace are watched, so each keeps its identity and labels (not its
// secrets' names nor its annotations); a Pod keeps its identity, labels and service account; any other
// object (a SecurityGroupPolicy) loses its managedFields.
func slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		return &corev1.ServiceAccount{TypeMeta: o.TypeMeta, ObjectMeta: identity(o.ObjectMeta)}, nil
	case *corev1.Pod:
		out := &corev1.Pod{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: identity(o.ObjectMeta),
			Spec:       corev1.PodSpec{NodeName: o.Spec.NodeName, ServiceAccountName: o.Spec.ServiceAccountName},
		}
		if v, ok := o.Annotations[kubewatch.MirrorAnnotation]; ok {
			out.Annotations = map[string]string{kubewatch.MirrorAnnotation: v}
		}
		return out, nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// identity is the metadata an Event's reference and the selection need.
func identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
}
