package cluster

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ociimage"
)

// The toolbox's tools run in a root of their own, as they do in a container: the shell, dig and getent find
// everything they load inside it.
func TestTheToolboxRunsItsToolsInARootOfItsOwn(t *testing.T) {
	testenv.RequireRoot(t) // chroot
	files, err := toolboxFiles()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, ociimage.Image{Files: files}, root)
	for _, args := range [][]string{
		{"/bin/sh", "-c", "for i in `seq 1 2`; do hostname >/dev/null; done; echo ok"},
		{"/usr/bin/dig", "-v"},
		{"/usr/bin/getent", "passwd", "root"},
		{"/usr/bin/curl", "--version"},
		{"/bin/sh", "-c", "nc -h 2>&1 | grep -q OpenBSD"}, // the shell finds netcat-openbsd's nc, not busybox's
		{"/usr/bin/ss", "-V"},
		{"/bin/sh", "-c", "wget -q -O - -T 1 http://127.0.0.1:1/; test $? = 4"}, // refused, not crashed
		{"/bin/bash", "-c", "true"},
	} {
		out, err := exec.Command("chroot", append([]string{root}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

// unpack writes the image's layer into dir.
func unpack(t *testing.T, im ociimage.Image, dir string) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "im.tar")
	if err := im.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	outer, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	layer := member(t, outer, "layer.tar")
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode))
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		default:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func member(t *testing.T, archive []byte, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the archive: %v", name, err)
		}
		if h.Name == name {
			b, _ := io.ReadAll(tr)
			return b
		}
	}
}
