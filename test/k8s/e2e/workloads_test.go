package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

const ns = "default"

// netexec is agnhost's netexec server (HTTP on 8080, UDP on 8081) with kubelet's HTTP readiness and TCP
// liveness probes every 2 s, as an ordinary web workload has them.
func netexec(hostPort int32) corev1.Container {
	c := corev1.Container{
		Name: "netexec", Image: cluster.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Args: []string{"netexec", "--http-port=8080", "--udp-port=8081"},
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "udp", ContainerPort: 8081, Protocol: corev1.ProtocolUDP},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 2, TimeoutSeconds: 2},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 5},
	}
	if hostPort != 0 {
		c.Ports[0].HostPort = hostPort
	}
	return c
}

// deployment makes a Deployment of netexec pods pinned to node.
func deployment(name, node string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
					Containers:                    []corev1.Container{netexec(0)},
					TerminationGracePeriodSeconds: ptr.To[int64](2),
				},
			},
		},
	}
}

// startWebAndClients starts web netexec pods on node 1, remote ones on node 2 (none when remote is 0) and a
// client pod on each (client1, client2), and returns them once all are Ready, with the time that took.
func (s *suite) startWebAndClients(t *testing.T, web, remote int32) ([]corev1.Pod, time.Duration) {
	t.Helper()
	ctx := context.Background()
	apps, core := s.c.Client.AppsV1().Deployments(ns), s.c.Client.CoreV1().Pods(ns)
	start := time.Now()
	type group struct {
		sel string
		n   int32
	}
	want := []group{{"app=web", web}, {"app=client1", 1}, {"app=client2", 1}}
	mustCreate(t, "web", apps.Create, deployment("web", s.node1.Name, web))
	if remote > 0 {
		mustCreate(t, "remote", apps.Create, deployment("remote", s.node2.Name, remote))
		want = append(want, group{"app=remote", remote})
	}
	mustCreate(t, "client1", core.Create, pod("client1", s.node1.Name, 0))
	mustCreate(t, "client2", core.Create, pod("client2", s.node2.Name, 0))
	var pods []corev1.Pod
	for _, w := range want {
		ps, err := waitPodsReady(ctx, s.c, ns, w.sel, int(w.n), 4*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, ps...)
	}
	return pods, time.Since(start)
}

// pod makes one netexec pod on node, with a hostPort when hostPort is not 0.
func pod(name, node string, hostPort int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			Containers:                    []corev1.Container{netexec(hostPort)},
			TerminationGracePeriodSeconds: ptr.To[int64](2),
		},
	}
}

// service makes a Service of the app's HTTP (80) and UDP (81) ports.
func service(name, app string, typ corev1.ServiceType, local bool) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "udp", Port: 81, TargetPort: intstr.FromInt32(8081), Protocol: corev1.ProtocolUDP},
			},
		},
	}
	if local {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return s
}

// waitPodsReady waits until the pods matching selector are count, Running and Ready.
func waitPodsReady(ctx context.Context, c *cluster.Cluster, namespace, selector string, count int, timeout time.Duration) ([]corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			var ready []corev1.Pod
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
					ready = append(ready, p)
				}
			}
			if len(ready) == count && len(pods.Items) == count {
				return ready, nil
			}
			last = fmt.Sprintf("%d of %d ready (%d pods)%s", len(ready), count, len(pods.Items), firstProblem(pods.Items))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pods %s: after %s: %s", selector, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// firstProblem names the first pod that is not ready and why, for error messages.
func firstProblem(pods []corev1.Pod) string {
	for _, p := range pods {
		if podReady(&p) {
			continue
		}
		why := string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				why += " " + cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				why += " " + string(cond.Type) + ": " + cond.Message
			}
		}
		return fmt.Sprintf("; %s: %s", p.Name, why)
	}
	return ""
}

func mustCreate[T any](t *testing.T, what string, create func(context.Context, T, metav1.CreateOptions) (T, error), obj T) T {
	t.Helper()
	out, err := create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s: %v", what, err)
	}
	return out
}
