package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTheChartRendersWithDefaultValuesToWhatTheIssueAsks(t *testing.T) {
	checkDeployment(t, decodeAll(t, renderChart(t, "eniwire", "kube-system", nil)))
}

// With the defaults and the release named eniwire, the chart's pods are the manifest's pods: the two ways to
// deploy cannot drift apart.
func TestTheChartWithDefaultValuesRendersTheManifestsPods(t *testing.T) {
	chart := theOne(t, "DaemonSet", decodeAll(t, renderChart(t, "eniwire", "kube-system", nil)).daemonSets)
	manifest := theOne(t, "DaemonSet", decodeAll(t, readDir(t, "manifests")).daemonSets)
	for _, ds := range []*corev1.PodSpec{&chart.Spec.Template.Spec, &manifest.Spec.Template.Spec} {
		for i := range ds.Containers {
			env := ds.Containers[i].Env
			sort.Slice(env, func(a, b int) bool { return env[a].Name < env[b].Name })
		}
	}
	if !reflect.DeepEqual(chart.Spec.Template.Spec, manifest.Spec.Template.Spec) {
		t.Errorf("pod specs differ:\nchart    %+v\nmanifest %+v", chart.Spec.Template.Spec, manifest.Spec.Template.Spec)
	}
	if !reflect.DeepEqual(chart.Spec.Selector, manifest.Spec.Selector) || !reflect.DeepEqual(chart.Spec.UpdateStrategy, manifest.Spec.UpdateStrategy) {
		t.Errorf("selector or update strategy differ")
	}
	if !reflect.DeepEqual(chart.Spec.Template.Labels, manifest.Spec.Template.Labels) {
		t.Errorf("pod labels differ: chart %v, manifest %v", chart.Spec.Template.Labels, manifest.Spec.Template.Labels)
	}
}

func TestTheChartCarriesTheProjectsConflist(t *testing.T) {
	sameFile(t, "10-eniwire.conflist", filepath.Join(chartDir, "files", "10-eniwire.conflist"))
}

// sameFile fails the test unless the chart's copy holds exactly what the project's file does.
func sameFile(t *testing.T, original, chartCopy string) {
	t.Helper()
	want, err := os.ReadFile(original)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartCopy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s: copy it again", chartCopy, original)
	}
}

func TestTheChartRendersNonDefaultValues(t *testing.T) {
	overrides := map[string]any{
		"image":          map[string]any{"repository": "registry.example/net/eniwire", "tag": "v9.9.9", "pullPolicy": "Always"},
		"metricsPort":    9100,
		"settings":       map[string]any{"CLUSTER_NAME": "prod-1", "WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "10"},
		"resources":      map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "128Mi"}, "limits": map[string]any{"memory": "256Mi"}},
		"tolerations":    []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "net", "effect": "NoSchedule"}},
		"nodeSelector":   map[string]any{"kubernetes.io/os": "linux", "node.example/pool": "general"},
		"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		"podAnnotations": map[string]any{"prometheus.io/scrape": "true"},
		"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 3}},
	}
	objs := decodeAll(t, renderChart(t, "net", "networking", overrides))
	ds := theOne(t, "DaemonSet", objs.daemonSets)
	cm := theOne(t, "ConfigMap", objs.configMaps)
	sa := theOne(t, "ServiceAccount", objs.serviceAccounts)
	pod := ds.Spec.Template.Spec
	c := agentContainer(t, ds)
	env := envMap(t, c)

	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"the release names the objects", []string{ds.Name, cm.Name, sa.Name, pod.ServiceAccountName}, []string{"net", "net-cni", "net", "net"}},
		{"the release's namespace holds them", []string{ds.Namespace, cm.Namespace, sa.Namespace}, []string{"networking", "networking", "networking"}},
		{"the image is the one asked for", []string{c.Image, string(c.ImagePullPolicy)}, []string{"registry.example/net/eniwire:v9.9.9", "Always"}},
		{"overridden settings take their value", []string{env["CLUSTER_NAME"], env["WARM_IP_TARGET"], env["MINIMUM_IP_TARGET"]}, []string{"prod-1", "5", "10"}},
		{"other settings keep their default", env["WARM_ENI_TARGET"], "1"},
		{"the metrics port moves the listener, the port and the probes together", []any{env["ENIWIRE_METRICS_ADDR"], c.Ports[0].ContainerPort}, []any{":9100", int32(9100)}},
		{"resources are the ones asked for", []string{c.Resources.Requests.Cpu().String(), c.Resources.Requests.Memory().String(), c.Resources.Limits.Memory().String()}, []string{"50m", "128Mi", "256Mi"}},
		{"tolerations replace the default", len(pod.Tolerations), 1},
		{"the node selector is the one asked for", pod.NodeSelector, map[string]string{"kubernetes.io/os": "linux", "node.example/pool": "general"}},
		{"the seccomp profile is the one asked for", string(c.SecurityContext.SeccompProfile.Type), "RuntimeDefault"},
		{"pod annotations are set", ds.Spec.Template.Annotations, map[string]string{"prometheus.io/scrape": "true"}},
		{"the update strategy is the one asked for", ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String(), "3"},
		{"the ConfigMap volume follows the release name", pod.Volumes[3].ConfigMap.Name, "net-cni"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if tl := pod.Tolerations[0]; tl.Key != "dedicated" || tl.Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("toleration %+v", tl)
	}
	if len(env) != len(agentSettingNamesInValues(t))+2 {
		t.Errorf("rendered %d env vars, want every setting of values.yaml plus ENIWIRE_METRICS_ADDR and %s", len(env), nodeNameEnv)
	}
}

func agentSettingNamesInValues(t *testing.T) map[string]any {
	t.Helper()
	var values struct {
		Settings map[string]any `json:"settings"`
	}
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &values)
	return values.Settings
}
