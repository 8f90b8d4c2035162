package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

// Helm is not packaged for Debian and its Go library pulls client-go and some forty modules into go.mod, so
// the chart is rendered here the way Helm renders it: Go text/template over .Values, .Release, .Chart and
// .Files, with the few Sprig functions the templates use, implemented below with Helm's meaning. The
// templates are kept to those functions (no include, no tpl); a template that calls anything else fails to
// parse here, which keeps the chart within what this renderer proves.

const chartDir = "helm/eniwire"

// chartFuncs are the only functions the templates may call beyond text/template's builtins.
var chartFuncs = template.FuncMap{
	// toYaml is Helm's: YAML of the value without the trailing newline.
	"toYaml": func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(b), "\n"), err
	},
	"indent": func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	},
	"nindent": func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	},
	// quote is Sprig's: the value's string form, double-quoted with Go escapes (valid YAML).
	"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
	// default is Sprig's: def when v is empty (nil, "", 0, false, empty collection), v otherwise.
	"default": func(def, v any) any {
		if v == nil {
			return def
		}
		rv := reflect.ValueOf(v)
		if rv.IsZero() || ((rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.Len() == 0) {
			return def
		}
		return v
	},
}

// chartFiles is .Files: Get reads a file of the chart by its path relative to the chart's root.
type chartFiles struct{ root string }

func (f chartFiles) Get(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(f.root, filepath.FromSlash(name)))
	return string(b), err
}

// renderChart renders every template of the chart with values.yaml merged under overrides, as
// `helm template <release> deploy/helm/eniwire -n <namespace> -f overrides.yaml` would.
func renderChart(t *testing.T, release, namespace string, overrides map[string]any) map[string][]byte {
	t.Helper()
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(chartDir, "Chart.yaml"), &chart)
	var values map[string]any
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &values)
	values = mergeValues(values, overrides)

	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": true},
		"Chart":   map[string]any{"Name": chart.Name, "Version": chart.Version, "AppVersion": chart.AppVersion},
		"Files":   chartFiles{root: chartDir},
	}
	paths, err := filepath.Glob(filepath.Join(chartDir, "templates", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no templates in %s", chartDir)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// missingkey=error: a template that reads a value the chart does not define fails, where Helm would
		// silently print nothing.
		tmpl, err := template.New(filepath.Base(p)).Funcs(chartFuncs).Option("missingkey=error").Parse(string(src))
		if err != nil {
			t.Fatalf("parsing %s: %v", p, err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, data); err != nil {
			t.Fatalf("rendering %s: %v", p, err)
		}
		out[p] = buf.Bytes()
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// mergeValues is Helm's coalescing of user values over the chart's: maps merge key by key, anything else
// (lists included) is replaced whole.
func mergeValues(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = mergeValues(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}
