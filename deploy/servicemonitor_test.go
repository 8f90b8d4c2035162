package deploy

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1) the chart
// writes; decoding strictly into it fails on any other field, as the operator's CRD schema would.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func TestTheChartRendersNoServiceMonitorByDefault(t *testing.T) {
	objs := decodeAll(t, renderChart(t, "eniwire", "kube-system", nil))
	if len(objs.services) != 0 || len(objs.serviceMonitors) != 0 {
		t.Errorf("default values render %d Services and %d ServiceMonitors, want none", len(objs.services), len(objs.serviceMonitors))
	}
}

// With serviceMonitor.enabled the chart renders a headless Service over the agents' metrics port and a
// ServiceMonitor that selects exactly that Service, in the release's namespace.
func TestTheChartRendersTheServiceMonitorWhenEnabled(t *testing.T) {
	objs := decodeAll(t, renderChart(t, "net", "networking", map[string]any{
		"metricsPort":    9100,
		"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "kube-prometheus-stack"}},
	}))
	ds := theOne(t, "DaemonSet", objs.daemonSets)
	svc := theOne(t, "Service", objs.services)
	sm := theOne(t, "ServiceMonitor", objs.serviceMonitors)
	selected, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"the Service is headless", svc.Spec.ClusterIP, "None"},
		{"the Service selects the agents' pods", isSubset(svc.Spec.Selector, ds.Spec.Template.Labels), true},
		{"the Service serves the metrics port by name", []any{svc.Spec.Ports[0].Name, svc.Spec.Ports[0].Port, svc.Spec.Ports[0].TargetPort.String()}, []any{"metrics", int32(9100), "metrics"}},
		{"the agent's container port carries that name", agentContainer(t, ds).Ports[0].Name, "metrics"},
		{"the ServiceMonitor selects the Service", selected.Matches(labels.Set(svc.Labels)), true},
		{"the ServiceMonitor looks in the release's namespace", []string{sm.Namespace, svc.Namespace, sm.Spec.NamespaceSelector.MatchNames[0]}, []string{"networking", "networking", "networking"}},
		{"the ServiceMonitor scrapes /metrics on the named port at the interval asked for", []string{sm.Spec.Endpoints[0].Port, sm.Spec.Endpoints[0].Path, sm.Spec.Endpoints[0].Interval}, []string{"metrics", "/metrics", "15s"}},
		{"the extra labels are set", sm.Labels["release"], "kube-prometheus-stack"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func isSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return len(sub) > 0
}
