// Package cnpconformance reads the ClusterNetworkPolicies of network-policy-api's conformance suite, for
// the tests that hold eniwire's parser (netpol/cnp) and its CRD (deploy) to them. go.mod does not require
// the module (its k8s.io modules are newer than eniwire's), so Policies fetches it with `go mod download`
// into the module cache, from the module proxy on a fresh machine.
package cnpconformance

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

// Module is the release of the API whose conformance manifests eniwire is held to.
const Module = "sigs.k8s.io/network-policy-api@v0.3.0"

// Count is how many ClusterNetworkPolicies that release's conformance/base holds, so that a manifest read
// wrong (a document not split, a file not found) fails its test.
const Count = 35

// HostNetworkPorts are the conformance suite's default ports, which its manifests' templates name.
var HostNetworkPorts = []int{34345, 34346, 34347, 34348, 34349, 34350, 34351, 34352}

// Policy is one ClusterNetworkPolicy of the suite, as JSON, and where it was read.
type Policy struct {
	Where string // its file and document
	JSON  []byte
}

// ErrUnavailable: the module could not be fetched (no module proxy); tests fail under CI=true on it.
var ErrUnavailable = errors.New("the conformance manifests are unavailable")

// Policies returns every ClusterNetworkPolicy of Module's conformance/base, its templates rendered as the
// suite renders them.
func Policies() ([]Policy, error) {
	out, err := exec.Command("go", "mod", "download", "-json", Module).Output()
	if err != nil {
		return nil, fmt.Errorf("%w: go mod download %s: %v", ErrUnavailable, Module, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return nil, fmt.Errorf("%w: go mod download %s: no folder in %q (%v %s)", ErrUnavailable, Module, out, err, m.Error)
	}
	var policies []Policy
	err = filepath.WalkDir(filepath.Join(m.Dir, "conformance", "base"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		docs, err := documents(path)
		if err != nil {
			return err
		}
		for i, doc := range docs {
			var meta struct{ Kind string }
			if err := json.Unmarshal(doc, &meta); err != nil {
				return fmt.Errorf("%s document %d: %w", path, i, err)
			}
			if meta.Kind == "ClusterNetworkPolicy" {
				policies = append(policies, Policy{fmt.Sprintf("%s document %d", path, i), doc})
			}
		}
		return nil
	})
	return policies, err
}

// documents returns the YAML documents of the manifest file at path as JSON, its templates rendered.
func documents(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New(filepath.Base(path)).Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var rendered bytes.Buffer
	if err := tmpl.Execute(&rendered, struct{ HostNetworkPorts []int }{HostNetworkPorts}); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(&rendered))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(js) != "null" {
			docs = append(docs, js)
		}
	}
}

// PoliciesForTest is Policies for a test: unavailable manifests fail it under CI=true and skip it
// elsewhere (testenv.Unavailable), any other error fails it, and so does a count other than Count.
func PoliciesForTest(t testing.TB) []Policy {
	t.Helper()
	policies, err := Policies()
	if errors.Is(err, ErrUnavailable) {
		testenv.Unavailable(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != Count {
		t.Fatalf("found %d ClusterNetworkPolicies in %s's conformance manifests, want %d", len(policies), Module, Count)
	}
	return policies
}
