// Package ociimage writes container images as docker-save archives (manifest.json, the config JSON, one layer
// tar), the layout `ctr images import` loads, so tests run containers without a registry or a Docker engine.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// File is one file of the image's only layer. A Path ending in "/" is a directory; a Mode with fs.ModeSymlink
// makes a symbolic link whose target is Data.
type File struct {
	Path string // absolute, as the container sees it
	Mode fs.FileMode
	Data []byte
}

// Image is a one-layer Linux/amd64 image.
type Image struct {
	Tags       []string // names it is imported under, e.g. "registry.k8s.io/pause:3.10"
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

// FromBinary reads the file at src and places it at dst with mode 0755.
func FromBinary(src, dst string) (File, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return File{}, fmt.Errorf("reading %s: %w", src, err)
	}
	return File{Path: dst, Mode: 0o755, Data: b}, nil
}

// WriteArchive writes the image to path in docker-save layout. Parent directories of every file are added to
// the layer with mode 0755 (a distroless-like tree: no shell, nothing else).
func (im Image) WriteArchive(path string) error {
	layer, err := im.layer()
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": time.Unix(0, 0).UTC(),
		"config": map[string]any{"Entrypoint": im.Entrypoint, "Cmd": im.Cmd, "Env": im.Env, "User": im.User,
			"WorkingDir": im.WorkingDir},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": im.Tags, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, e := range []struct {
		name string
		data []byte
	}{{"layer.tar", layer}, {configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	return nil
}

// layer is the tar of every file and its parent directories, sorted so the archive is reproducible.
func (im Image) layer() ([]byte, error) {
	entries := map[string]File{}
	for _, f := range im.Files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("image file %q: the path must be absolute", f.Path)
		}
		name := strings.TrimPrefix(f.Path, "/")
		entries[name] = f
		for d := path.Dir(strings.TrimSuffix(name, "/")); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := entries[d+"/"]; !ok {
				entries[d+"/"] = File{Path: "/" + d + "/", Mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := entries[n]
		h := &tar.Header{Name: n, Mode: int64(f.Mode.Perm()), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(f.Data))}
		switch {
		case strings.HasSuffix(n, "/"):
			h.Typeflag, h.Size = tar.TypeDir, 0
			if f.Mode&fs.ModeSticky != 0 {
				h.Mode |= 0o1000
			}
		case f.Mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Size, h.Linkname, h.Mode = tar.TypeSymlink, 0, string(f.Data), 0o777
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
