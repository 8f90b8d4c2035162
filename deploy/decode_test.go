package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// objects are the Kubernetes objects of one set of manifests, decoded strictly: an unknown or duplicated
// field anywhere fails the decode, as it would fail `kubectl apply --validate=strict`.
type objects struct {
	serviceAccounts []corev1.ServiceAccount
	configMaps      []corev1.ConfigMap
	daemonSets      []appsv1.DaemonSet
	clusterRoles    []rbacv1.ClusterRole
	roleBindings    []rbacv1.ClusterRoleBinding
	crds            []apiextensionsv1.CustomResourceDefinition
	services        []corev1.Service
	serviceMonitors []serviceMonitor
	policies        []admissionv1.ValidatingAdmissionPolicy
	policyBindings  []admissionv1.ValidatingAdmissionPolicyBinding
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll decodes every YAML document of every named source into its Kubernetes type by its kind.
func decodeAll(t *testing.T, sources map[string][]byte) objects {
	t.Helper()
	var objs objects
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, doc := range docSeparator.Split(string(sources[name]), -1) {
			if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s document %d: %v", name, i, err)
			}
			where := fmt.Sprintf("%s document %d (%s %s)", name, i, meta.APIVersion, meta.Kind)
			var err error
			switch meta.APIVersion + "/" + meta.Kind {
			case "v1/ServiceAccount":
				err = decodeStrict(doc, &objs.serviceAccounts)
			case "v1/ConfigMap":
				err = decodeStrict(doc, &objs.configMaps)
			case "apps/v1/DaemonSet":
				err = decodeStrict(doc, &objs.daemonSets)
			case "rbac.authorization.k8s.io/v1/ClusterRole":
				err = decodeStrict(doc, &objs.clusterRoles)
			case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
				err = decodeStrict(doc, &objs.roleBindings)
			case "apiextensions.k8s.io/v1/CustomResourceDefinition":
				err = decodeStrict(doc, &objs.crds)
			case "v1/Service":
				err = decodeStrict(doc, &objs.services)
			case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
				err = decodeStrict(doc, &objs.policies)
			case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
				err = decodeStrict(doc, &objs.policyBindings)
			case "monitoring.coreos.com/v1/ServiceMonitor":
				err = decodeStrict(doc, &objs.serviceMonitors)
			default:
				t.Fatalf("%s: a kind the tests do not know; teach decodeAll its type", where)
			}
			if err != nil {
				t.Fatalf("%s does not decode strictly: %v", where, err)
			}
		}
	}
	return objs
}

// decodeStrict decodes doc into a new T, failing on an unknown or duplicated field, and appends it to into.
func decodeStrict[T any](doc string, into *[]T) error {
	var o T
	if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
		return err
	}
	*into = append(*into, o)
	return nil
}

func stripComments(b []byte) []byte {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(b, nil)
}

// readDir returns every *.yaml file under dir by its path.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// theOne returns the single object of a kind, failing when there are none or several.
func theOne[T any](t *testing.T, kind string, list []T) *T {
	t.Helper()
	if len(list) != 1 {
		t.Fatalf("want exactly one %s, have %d", kind, len(list))
	}
	return &list[0]
}

// agentContainer returns the DaemonSet's agent container.
func agentContainer(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	for i := range ds.Spec.Template.Spec.Containers {
		if c := &ds.Spec.Template.Spec.Containers[i]; c.Name == "agent" {
			return c
		}
	}
	t.Fatalf("DaemonSet %s has no container named agent", ds.Name)
	return nil
}

// nodeNameEnv is the one setting the DaemonSet takes from the downward API: the Node custom networking
// watches.
const nodeNameEnv = "MY_NODE_NAME"

// envMap returns a container's env as name → value; an env var set twice or from a source fails the test.
func envMap(t *testing.T, c *corev1.Container) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, e := range c.Env {
		if _, dup := m[e.Name]; dup {
			t.Errorf("env %s is set twice", e.Name)
		}
		switch {
		case e.Name == nodeNameEnv:
			// The kubelet sets it from the pod's node; the agent's default is empty.
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
				t.Errorf("env %s must come from the pod's spec.nodeName", e.Name)
			}
		case e.ValueFrom != nil:
			t.Errorf("env %s comes from a source; settings are plain values", e.Name)
		}
		m[e.Name] = e.Value
	}
	return m
}
