package datapath

import (
	"bufio"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

const module = "github.com/eniwire/eniwire/"

// goList runs `go list` with format over patterns from the module's root and returns its lines.
func goList(t *testing.T, format string, patterns ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-f", format}, patterns...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	var lines []string
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	return lines
}

// The map of layers in doc.go, held to the code: each datapath package imports of eniwire only what the map
// puts below it (the contract may be imported by any), and nothing of the datapath depends on the controller.
func TestTheDatapathLayersImportOnlyWhatTheMapSays(t *testing.T) {
	allowed := map[string][]string{
		"datapath/dptypes":   nil,
		"datapath/snat":      nil,
		"datapath":           {"bpf", "datapath/dptypes", "internal/netlinkdump"},
		"datapath/hostroute": {"datapath/dptypes", "internal/netlinkdump"},
		"datapath/nodenet":   {"datapath", "datapath/dptypes", "datapath/hostroute", "datapath/snat", "internal/netlinkdump"},
	}
	seen := map[string]bool{}
	for _, line := range goList(t, "{{.ImportPath}} {{join .Imports \" \"}}", "./datapath/...") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if strings.Contains(pkg, "/internal/") {
			continue // test helpers
		}
		want, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in doc.go's map of layers", pkg)
			continue
		}
		seen[pkg] = true
		for _, imp := range fields[1:] {
			if own, ok := strings.CutPrefix(imp, module); ok && !slices.Contains(want, own) {
				t.Errorf("%s imports %s, which doc.go's map does not put below it", pkg, own)
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("doc.go's map names %s, which go list did not find", pkg)
		}
	}
	for _, line := range goList(t, "{{.ImportPath}}", "-deps", "./datapath/...") {
		if strings.HasPrefix(line, module+"controller") {
			t.Errorf("the datapath depends on %s: it must reach the controller through the contract alone", line)
		}
	}
}
