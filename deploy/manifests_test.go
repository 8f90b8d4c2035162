package deploy

import (
	"encoding/json"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func readConflist(t *testing.T) ([]byte, string) {
	t.Helper()
	b, err := os.ReadFile("10-eniwire.conflist")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type        string `json:"type"`
			AgentSocket string `json:"agentSocket"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatalf("10-eniwire.conflist: %v", err)
	}
	for _, p := range conf.Plugins {
		if p.Type == "eniwire" {
			return b, p.AgentSocket
		}
	}
	t.Fatal("10-eniwire.conflist has no eniwire plugin")
	return nil, ""
}

// checkDeployment holds every property the issue asks of the deployed objects; the manifest and the chart's
// renders go through it alike.
func checkDeployment(t *testing.T, objs objects) {
	t.Helper()
	sa := theOne(t, "ServiceAccount", objs.serviceAccounts)
	cm := theOne(t, "ConfigMap", objs.configMaps)
	ds := theOne(t, "DaemonSet", objs.daemonSets)
	pod := &ds.Spec.Template.Spec
	c := agentContainer(t, ds)
	conflist, socket := readConflist(t)

	t.Run("the pods run on the host network at node-critical priority", func(t *testing.T) {
		if !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" || pod.DNSPolicy != corev1.DNSDefault {
			t.Errorf("hostNetwork %v, priorityClassName %q, dnsPolicy %q", pod.HostNetwork, pod.PriorityClassName, pod.DNSPolicy)
		}
		if pod.ServiceAccountName != sa.Name {
			t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, sa.Name)
		}
		if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
			t.Errorf("the agent reads its Node and the ENIConfigs for custom networking; its pods must mount the token")
		}
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("the ServiceAccount must not hand its token to pods other than the agent's")
		}
	})
	t.Run("the agent may read Nodes, ENIConfigs, Pods, Namespaces, NetworkPolicies, SecurityGroupPolicies and ServiceAccounts, patch Nodes and their status, write Events, and nothing else", func(t *testing.T) {
		role := theOne(t, "ClusterRole", objs.clusterRoles)
		read := []string{"get", "list", "watch"}
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: append(read, "patch")},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{eniConfigGroup}, Resources: []string{eniConfigPlural}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
			{APIGroups: []string{sgpGroup}, Resources: []string{sgpPlural}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}
		if !reflect.DeepEqual(role.Rules, want) {
			t.Errorf("ClusterRole rules %+v, want %+v", role.Rules, want)
		}
		b := theOne(t, "ClusterRoleBinding", objs.roleBindings)
		wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}
		if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}) || !reflect.DeepEqual(b.Subjects, wantSubject) {
			t.Errorf("ClusterRoleBinding %+v %+v, want the role %s bound to %+v", b.RoleRef, b.Subjects, role.Name, wantSubject)
		}
	})
	t.Run("an admission policy lets the agent change its own Node alone", func(t *testing.T) {
		checkOwnNodePolicy(t, objs, sa)
	})
	t.Run("the pods tolerate every taint", func(t *testing.T) {
		if !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
		}) {
			t.Errorf("tolerations %+v lack {operator: Exists}", pod.Tolerations)
		}
	})
	t.Run("a rolling update takes a tenth of the nodes at a time", func(t *testing.T) {
		u := ds.Spec.UpdateStrategy
		if u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
			u.RollingUpdate.MaxUnavailable == nil || u.RollingUpdate.MaxUnavailable.String() != "10%" {
			t.Errorf("updateStrategy %+v", u)
		}
	})
	t.Run("the agent has liveness, readiness and start-up probes on its HTTP endpoints", func(t *testing.T) {
		for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe, "/healthz ": c.StartupProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != strings.TrimSpace(name) || p.HTTPGet.Port.String() != "metrics" {
				t.Errorf("probe for %s: %+v", name, p)
			}
		}
		env := envMap(t, c)
		if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || env["ENIWIRE_METRICS_ADDR"] != ":"+itoa(c.Ports[0].ContainerPort) {
			t.Errorf("port %+v does not match ENIWIRE_METRICS_ADDR %q", c.Ports, env["ENIWIRE_METRICS_ADDR"])
		}
	})
	t.Run("the agent requests resources", func(t *testing.T) {
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("resources %+v", c.Resources)
		}
	})
	t.Run("the agent has only the capabilities it needs", func(t *testing.T) {
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil {
			t.Fatal("no securityContext.capabilities")
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Error("the agent must not be privileged")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Error("allowPrivilegeEscalation must be false and the root file system read-only")
		}
		if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("drop %v, want [ALL]", sc.Capabilities.Drop)
		}
		want := []corev1.Capability{"NET_ADMIN", "BPF", "PERFMON"}
		if !slices.Equal(sc.Capabilities.Add, want) {
			t.Errorf("add %v, want %v", sc.Capabilities.Add, want)
		}
	})
	t.Run("the host paths the agent needs are mounted", func(t *testing.T) {
		vols := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			vols[v.Name] = v
		}
		want := map[string]struct{ host, mount string }{
			"bpffs": {"/sys/fs/bpf", "/sys/fs/bpf"}, "cni-bin": {"/opt/cni/bin", "/host/opt/cni/bin"},
			"cni-conf": {"/etc/cni/net.d", "/host/etc/cni/net.d"}, "state": {"/var/lib/eniwire", "/var/lib/eniwire"},
			"run": {"/run/eniwire", "/run/eniwire"},
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m
		}
		for name, w := range want {
			v, ok := vols[name]
			if !ok || v.HostPath == nil || v.HostPath.Path != w.host {
				t.Errorf("volume %s: %+v, want hostPath %s", name, v, w.host)
			}
			if m := mounts[name]; m.MountPath != w.mount || m.ReadOnly {
				t.Errorf("mount of %s: %+v, want writable at %s", name, m, w.mount)
			}
		}
		if p := mounts["bpffs"].MountPropagation; p == nil || *p != corev1.MountPropagationHostToContainer {
			t.Errorf("bpffs mountPropagation %v, want HostToContainer", p)
		}
		// The runtime's network namespaces, to release assignments of pods that went without a DEL.
		if v := vols["netns"]; v.HostPath == nil || v.HostPath.Path != "/var/run/netns" {
			t.Errorf("volume netns %+v, want hostPath /var/run/netns", v)
		}
		if m := mounts["netns"]; m.MountPath != "/var/run/netns" || !m.ReadOnly || m.MountPropagation == nil ||
			*m.MountPropagation != corev1.MountPropagationHostToContainer {
			t.Errorf("mount of netns %+v, want read-only at /var/run/netns with HostToContainer", m)
		}
		if v := vols["cni-conflist"]; v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
			t.Errorf("volume cni-conflist %+v, want the ConfigMap %s", v, cm.Name)
		}
		env := envMap(t, c)
		for _, k := range []string{"ENIWIRE_SOCKET", "ENIWIRE_STATE_DIR"} {
			if !under(env[k], mounts["run"].MountPath, mounts["state"].MountPath) {
				t.Errorf("%s = %q is not on a host mount; it would not survive the pod", k, env[k])
			}
		}
	})
	t.Run("the plugin dials the socket the agent serves", func(t *testing.T) {
		if got := envMap(t, c)["ENIWIRE_SOCKET"]; got != socket {
			t.Errorf("ENIWIRE_SOCKET %q, conflist agentSocket %q", got, socket)
		}
	})
	t.Run("the ConfigMap carries the project's conflist", func(t *testing.T) {
		if got := cm.Data["10-eniwire.conflist"]; strings.TrimSpace(got) != strings.TrimSpace(string(conflist)) {
			t.Errorf("ConfigMap conflist differs from deploy/10-eniwire.conflist:\n%s", got)
		}
	})
	t.Run("every object lives in the namespace of the DaemonSet", func(t *testing.T) {
		if sa.Namespace != ds.Namespace || cm.Namespace != ds.Namespace || ds.Namespace == "" {
			t.Errorf("namespaces: ServiceAccount %q, ConfigMap %q, DaemonSet %q", sa.Namespace, cm.Namespace, ds.Namespace)
		}
	})
}

func under(p string, dirs ...string) bool {
	for _, d := range dirs {
		if d != "" && strings.HasPrefix(path.Clean(p)+"/", path.Clean(d)+"/") {
			return true
		}
	}
	return false
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestTheManifestsDecodeStrictlyAndHoldWhatTheIssueAsks(t *testing.T) {
	checkDeployment(t, decodeAll(t, readDir(t, "manifests")))
}
