package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestAnArchiveHoldsTheFilesTheirParentsAndAManifestNamingItsTags(t *testing.T) {
	im := Image{
		Tags:       []string{"localhost/x:1", "localhost/x:2"},
		Files:      []File{{Path: "/usr/local/bin/x", Mode: 0o755, Data: []byte("exe")}, {Path: "/tmp/", Mode: 0o777 | os.ModeSticky}},
		Entrypoint: []string{"/usr/local/bin/x"},
	}
	path := filepath.Join(t.TempDir(), "x.tar")
	if err := im.WriteArchive(path); err != nil {
		t.Fatal(err)
	}
	outer := readTar(t, mustRead(t, path))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(outer["manifest.json"].data, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 2 || manifest[0].Layers[0] != "layer.tar" {
		t.Fatalf("manifest: %+v", manifest)
	}
	var config struct {
		Config struct{ Entrypoint []string }
	}
	if err := json.Unmarshal(outer[manifest[0].Config].data, &config); err != nil || config.Config.Entrypoint[0] != "/usr/local/bin/x" {
		t.Fatalf("config: %s (%v)", outer[manifest[0].Config].data, err)
	}
	layer := readTar(t, outer["layer.tar"].data)
	for name, mode := range map[string]int64{"usr/": 0o755, "usr/local/": 0o755, "usr/local/bin/": 0o755, "usr/local/bin/x": 0o755, "tmp/": 0o1777} {
		if e, ok := layer[name]; !ok || e.mode != mode {
			t.Errorf("layer entry %s: %+v, want mode %o", name, e, mode)
		}
	}
	if string(layer["usr/local/bin/x"].data) != "exe" {
		t.Errorf("file content: %q", layer["usr/local/bin/x"].data)
	}
	again := filepath.Join(t.TempDir(), "y.tar")
	if err := im.WriteArchive(again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, path), mustRead(t, again)) {
		t.Error("the same image written twice differs")
	}
}

func TestARelativePathIsRefused(t *testing.T) {
	if err := (Image{Files: []File{{Path: "x"}}}).WriteArchive(filepath.Join(t.TempDir(), "x.tar")); err == nil {
		t.Fatal("a relative path was accepted")
	}
}

func TestASymlinkFileBecomesALinkToItsData(t *testing.T) {
	im := Image{Files: []File{{Path: "/bin/busybox", Mode: 0o755, Data: []byte("exe")}, {Path: "/bin/sh", Mode: os.ModeSymlink, Data: []byte("busybox")}}}
	path := filepath.Join(t.TempDir(), "x.tar")
	if err := im.WriteArchive(path); err != nil {
		t.Fatal(err)
	}
	layer := readTar(t, readTar(t, mustRead(t, path))["layer.tar"].data)
	if e := layer["bin/sh"]; e.typ != tar.TypeSymlink || e.link != "busybox" || len(e.data) != 0 {
		t.Errorf("bin/sh: %+v, want a symlink to busybox", e)
	}
}

type entry struct {
	mode int64
	typ  byte
	link string
	data []byte
}

func readTar(t *testing.T, b []byte) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = entry{mode: h.Mode, typ: h.Typeflag, link: h.Linkname, data: data}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
