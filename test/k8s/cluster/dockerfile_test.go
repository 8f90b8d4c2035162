package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTheImageMirrorsTheDockerfilesFinalStage(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, b := range []string{"eniwire-agent", "eniwire", "eniwirectl"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	im, err := ImageFromDockerfile(root, bin, []string{"x:1"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range im.Files {
		paths = append(paths, f.Path)
	}
	for _, want := range []string{"/usr/local/bin/eniwire-agent", "/usr/local/bin/eniwire", "/usr/local/bin/eniwirectl", "/etc/eniwire/cni/10-eniwire.conflist"} {
		if !slices.Contains(paths, want) {
			t.Errorf("image lacks %s (has %v)", want, paths)
		}
	}
	if !slices.Equal(im.Entrypoint, []string{"/usr/local/bin/eniwire-agent"}) || im.User != "0:0" {
		t.Errorf("entrypoint %v, user %q", im.Entrypoint, im.User)
	}
}

func TestAnInstructionTheBuilderDoesNotMirrorIsAnError(t *testing.T) {
	dir := t.TempDir()
	df := "FROM golang AS build\nRUN go build\nFROM distroless\nCOPY --from=build /out/x /usr/local/bin/\nRUN echo hi\nENTRYPOINT [\"/usr/local/bin/x\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := ImageFromDockerfile(dir, dir, nil)
	if err == nil || !strings.Contains(err.Error(), `"RUN"`) {
		t.Fatalf("a RUN in the final stage: err %v", err)
	}
}
