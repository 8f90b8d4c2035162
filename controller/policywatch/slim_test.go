package policywatch

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eniwire/eniwire/controller/kubewatch"
	"github.com/eniwire/eniwire/netpol"
)

// TestASlimPodCompilesAsTheFullOne: what the transform keeps of a Pod is all the compiler reads: a policy
// whose egress names a port of the peer compiles the same over the full Pods and the slim ones.
func TestASlimPodCompilesAsTheFullOne(t *testing.T) {
	full := func(name, nodeName, ip string, app string) *corev1.Pod {
		p := pod("shop", name, nodeName, ip, map[string]string{"app": app})
		p.Annotations = map[string]string{"big": "x", kubewatch.MirrorAnnotation: "h"}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "data"}}
		p.Spec.Containers = []corev1.Container{
			{Name: "app", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}},
			{Name: "sidecar", Image: "proxy:1"},
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true}}
		return p
	}
	pods := []*corev1.Pod{full("web", node, "10.0.1.10", "web"), full("db", "node-b", "10.0.2.20", "db")}
	port := intstr.FromString("http")
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		},
	}
	var slims []*corev1.Pod
	for _, p := range pods {
		s, _ := slim(p)
		slims = append(slims, s.(*corev1.Pod))
	}
	namespaces := []*corev1.Namespace{namespace("shop", nil)}
	want := netpol.Compile(node, []*networkingv1.NetworkPolicy{np}, namespaces, pods)
	got := netpol.Compile(node, []*networkingv1.NetworkPolicy{np}, namespaces, slims)
	if !reflect.DeepEqual(got, want) || len(want) != 1 || len(want[addr("10.0.1.10")].Egress) != 1 {
		t.Fatalf("slim pods compile to %v, full ones to %v", got, want)
	}
	s := slims[0]
	if s.ManagedFields != nil || s.Spec.Volumes != nil || len(s.Spec.Containers) != 1 || s.Status.ContainerStatuses != nil ||
		len(s.Annotations) != 1 || s.UID != pods[0].UID {
		t.Errorf("slim pod kept %+v", s)
	}
}
