package cnp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/eniwire/eniwire/internal/testenv"
)

// conformanceModule is the release of the API whose conformance manifests every ClusterNetworkPolicy must
// parse from; go.mod does not require it (its k8s.io modules are newer), so the test downloads it.
const conformanceModule = "sigs.k8s.io/network-policy-api@v0.3.0"

// conformancePolicies is how many ClusterNetworkPolicies that release's conformance/base holds, so that a
// manifest skipped by mistake (a document not split, a file not found) fails the test.
const conformancePolicies = 35

func TestEveryClusterNetworkPolicyOfTheConformanceSuiteParses(t *testing.T) {
	base := conformanceBase(t)
	parsed, files := 0, 0
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		files++
		for i, doc := range documents(t, path) {
			if !strings.Contains(doc, "kind: ClusterNetworkPolicy") {
				continue
			}
			u := decode(t, doc)
			if u.GetKind() != kind {
				continue
			}
			p, err := Parse(u)
			if err != nil {
				t.Errorf("%s, document %d: %v", path, i, err)
				continue
			}
			if len(p.Warnings) > 0 {
				t.Errorf("%s, document %d: warnings %q", path, i, p.Warnings)
			}
			parsed++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ClusterNetworkPolicies of %d manifest files in %s parsed", parsed, files, base)
	if parsed != conformancePolicies {
		t.Errorf("parsed %d ClusterNetworkPolicies, want the %d of %s", parsed, conformancePolicies, conformanceModule)
	}
}

// documents returns the YAML documents of the manifest file at path, its templates rendered as the
// conformance suite renders them: HostNetworkPorts are its default eight ports from 34345.
func documents(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New(filepath.Base(path)).Parse(string(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var rendered bytes.Buffer
	ports := []int{34345, 34346, 34347, 34348, 34349, 34350, 34351, 34352}
	if err := tmpl.Execute(&rendered, struct{ HostNetworkPorts []int }{ports}); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var docs []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(&rendered))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if js, err := yaml.YAMLToJSON(doc); err == nil && string(js) != "null" {
			docs = append(docs, string(doc))
		}
	}
}

// conformanceBase is the conformance/base folder of conformanceModule, which `go mod download` fetches
// into the module cache when it is not there yet (a fresh machine): the module proxy serves it.
func conformanceBase(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", conformanceModule).Output()
	if err != nil {
		testenv.Unavailable(t, "go mod download "+conformanceModule+": "+err.Error())
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		testenv.Unavailable(t, fmt.Sprintf("go mod download %s: no folder in %q (%v %s)", conformanceModule, out, err, m.Error))
	}
	return filepath.Join(m.Dir, "conformance", "base")
}
