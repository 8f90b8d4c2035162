package policywatch

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller/kubewatch"
)

// slim is the informers' transform: each object keeps only what the watch reads, before the store holds
// it. The agent holds every Pod of the cluster (any may be a peer), so a Pod keeps its identity, labels,
// node, host networking, containers' ports, phase and addresses, and drops the rest (volumes, env,
// statuses, managedFields): at 20,000 pods most of a Pod's bytes. Other objects lose their managedFields.
func slim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp, Labels: p.Labels,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}
	if v, ok := p.Annotations[kubewatch.MirrorAnnotation]; ok {
		out.Annotations = map[string]string{kubewatch.MirrorAnnotation: v}
	}
	for _, c := range p.Spec.Containers {
		if len(c.Ports) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return out, nil
}
