package cniinstall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/eniwire/eniwire/internal/testenv"
)

// hostRoot is a temporary stand-in for the host: opt/cni/bin and etc/cni/net.d, plus an image dir holding the
// plugin binary to install.
type hostRoot struct {
	root, bin, conf, image string
}

func newHostRoot(t *testing.T) hostRoot {
	t.Helper()
	root := t.TempDir()
	h := hostRoot{
		root:  root,
		bin:   filepath.Join(root, "host", "opt", "cni", "bin"),
		conf:  filepath.Join(root, "host", "etc", "cni", "net.d"),
		image: filepath.Join(root, "image"),
	}
	for _, d := range []string{h.bin, h.conf, h.image} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// plugin writes a fake plugin binary of the given content into the image dir and returns its path.
func (h hostRoot) plugin(t *testing.T, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(h.image, name)
	if err := os.WriteFile(p, content, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func (h hostRoot) options(pluginSrc string, conflist []byte) Options {
	return Options{PluginSrc: pluginSrc, HostBinDir: h.bin, HostConfDir: h.conf, Conflist: conflist,
		Logger: slog.New(slog.DiscardHandler)}
}

func conflist(mtu int, pad int) []byte {
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":"eniwire","plugins":[{"type":"eniwire","mtu":%d,"pad":%q},`+
		`{"type":"portmap","capabilities":{"portMappings":true}}]}`, mtu, strings.Repeat("x", pad))
}

func readFile(t *testing.T, p string) ([]byte, os.FileInfo) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return b, st
}

func TestInstallPutsThePluginAndConflistInPlaceWithTheirModes(t *testing.T) {
	for _, umask := range []int{0o022, 0o077} {
		t.Run(fmt.Sprintf("under umask %04o", umask), func(t *testing.T) {
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			h := newHostRoot(t)
			bin := []byte("\x7fELF plugin v1")
			conf := conflist(9001, 0)
			if err := Install(context.Background(), h.options(h.plugin(t, "eniwire", bin), conf)); err != nil {
				t.Fatal(err)
			}
			got, st := readFile(t, filepath.Join(h.bin, "eniwire"))
			if !bytes.Equal(got, bin) || st.Mode().Perm() != 0o755 {
				t.Errorf("plugin: content %q mode %v, want %q 0755", got, st.Mode().Perm(), bin)
			}
			got, st = readFile(t, filepath.Join(h.conf, "10-eniwire.conflist"))
			if !bytes.Equal(got, conf) || st.Mode().Perm() != 0o644 {
				t.Errorf("conflist: content %q mode %v, want %q 0644", got, st.Mode().Perm(), conf)
			}
			assertOnly(t, h.bin, "eniwire")
			assertOnly(t, h.conf, "10-eniwire.conflist")
		})
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if fmt.Sprint(got) != fmt.Sprint(names) {
		t.Errorf("%s holds %v, want exactly %v", dir, got, names)
	}
}

func TestInstallTwiceLeavesTheFilesUntouched(t *testing.T) {
	h := newHostRoot(t)
	opts := h.options(h.plugin(t, "eniwire", []byte("plugin")), conflist(9001, 0))
	if err := Install(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	_, bin1 := readFile(t, filepath.Join(h.bin, "eniwire"))
	_, conf1 := readFile(t, filepath.Join(h.conf, "10-eniwire.conflist"))
	for i := range 3 {
		if err := Install(context.Background(), opts); err != nil {
			t.Fatalf("install %d: %v", i+2, err)
		}
	}
	_, bin2 := readFile(t, filepath.Join(h.bin, "eniwire"))
	_, conf2 := readFile(t, filepath.Join(h.conf, "10-eniwire.conflist"))
	// The same inode means no rename happened: a runtime watching the conf dir sees no event and does not reload.
	if !os.SameFile(bin1, bin2) || !os.SameFile(conf1, conf2) {
		t.Errorf("a repeated install replaced files whose content was already right")
	}
	assertOnly(t, h.bin, "eniwire")
	assertOnly(t, h.conf, "10-eniwire.conflist")
}

func TestInstallRepairsAFileWithTheRightContentButWrongMode(t *testing.T) {
	h := newHostRoot(t)
	opts := h.options(h.plugin(t, "eniwire", []byte("plugin")), conflist(9001, 0))
	if err := Install(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(h.bin, "eniwire")
	if err := os.Chmod(dst, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Install(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if _, st := readFile(t, dst); st.Mode().Perm() != 0o755 {
		t.Errorf("plugin mode is %v after reinstall, want 0755", st.Mode().Perm())
	}
}

func TestUpgradeReplacesThePluginAndTheConflist(t *testing.T) {
	h := newHostRoot(t)
	if err := Install(context.Background(), h.options(h.plugin(t, "v1", []byte("plugin v1, the longer one")), conflist(9001, 10))); err != nil {
		t.Fatal(err)
	}
	v2bin, v2conf := []byte("plugin v2"), conflist(1500, 0)
	if err := Install(context.Background(), h.options(h.plugin(t, "v2", v2bin), v2conf)); err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, filepath.Join(h.bin, "eniwire")); !bytes.Equal(got, v2bin) {
		t.Errorf("plugin after upgrade = %q, want %q", got, v2bin)
	}
	if got, _ := readFile(t, filepath.Join(h.conf, "10-eniwire.conflist")); !bytes.Equal(got, v2conf) {
		t.Errorf("conflist after upgrade = %q, want %q", got, v2conf)
	}
	assertOnly(t, h.bin, "eniwire")
	assertOnly(t, h.conf, "10-eniwire.conflist")
}

// A reader (the runtime executing the plugin or loading the conf dir) must see the old file or the new one in
// full while installs replace them over and over; files are a few MiB so that an in-place write would be seen.
func TestReadersSeeTheOldOrTheNewFileNeverAPartialOne(t *testing.T) {
	h := newHostRoot(t)
	const size = 1 << 20
	bins := [][]byte{bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size/2)}
	confs := [][]byte{conflist(9001, size/4), conflist(1500, size/8)}
	srcs := []string{h.plugin(t, "a", bins[0]), h.plugin(t, "b", bins[1])}
	if err := Install(context.Background(), h.options(srcs[0], confs[0])); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var reads atomic.Int64
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	check := func(path string, want [][]byte) {
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(path)
			if err != nil {
				errs <- fmt.Errorf("reading %s during replacement: %w", path, err)
				return
			}
			if !bytes.Equal(b, want[0]) && !bytes.Equal(b, want[1]) {
				errs <- fmt.Errorf("%s held %d bytes matching neither version", path, len(b))
				return
			}
			reads.Add(1)
		}
	}
	// A runtime loads every *.conflist/*.conf/*.json in the conf dir: no other such name may ever appear.
	scanConfDir := func() {
		defer wg.Done()
		for !stop.Load() {
			ents, err := os.ReadDir(h.conf)
			if err != nil {
				errs <- err
				return
			}
			for _, e := range ents {
				ext := filepath.Ext(e.Name())
				if (ext == ".conflist" || ext == ".conf" || ext == ".json") && e.Name() != "10-eniwire.conflist" {
					errs <- fmt.Errorf("the conf dir showed %s, which a runtime would load", e.Name())
					return
				}
			}
		}
	}
	wg.Add(3)
	go check(filepath.Join(h.bin, "eniwire"), bins)
	go check(filepath.Join(h.conf, "10-eniwire.conflist"), confs)
	go scanConfDir()

	const rounds = 30
	for i := range rounds {
		if err := Install(context.Background(), h.options(srcs[(i+1)%2], confs[(i+1)%2])); err != nil {
			t.Fatalf("install round %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Fatal("the readers never completed a read while the files were replaced")
	}
	t.Logf("%d rounds of replacement, %d complete reads, none partial", rounds, reads.Load())
}

func TestInstallRemovesTemporaryFilesOfAnInterruptedInstall(t *testing.T) {
	h := newHostRoot(t)
	for _, d := range []string{h.bin, h.conf} {
		if err := os.WriteFile(filepath.Join(d, tempPrefix+"eniwire.123"), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Install(context.Background(), h.options(h.plugin(t, "eniwire", []byte("p")), conflist(9001, 0))); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, h.bin, "eniwire")
	assertOnly(t, h.conf, "10-eniwire.conflist")
}

func TestInstallStopsWhenTheContextIsCancelledAndLeavesNoTemporaryFile(t *testing.T) {
	h := newHostRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Install(ctx, h.options(h.plugin(t, "eniwire", []byte("p")), conflist(9001, 0)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Install with a cancelled context = %v, want context.Canceled", err)
	}
	assertOnly(t, h.bin)
	assertOnly(t, h.conf)
}

func TestInstallFailsClearly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(t *testing.T, h hostRoot, o *Options)
		want    error
		mention string
	}{
		{"when the host bin dir is not mounted", func(t *testing.T, h hostRoot, o *Options) {
			o.HostBinDir = filepath.Join(h.root, "missing", "bin")
		}, ErrDirMissing, "missing/bin"},
		{"when the host conf dir is not mounted", func(t *testing.T, h hostRoot, o *Options) {
			o.HostConfDir = filepath.Join(h.root, "missing", "net.d")
		}, ErrDirMissing, "missing/net.d"},
		{"when the host bin dir is a file", func(t *testing.T, h hostRoot, o *Options) {
			f := filepath.Join(h.root, "file")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			o.HostBinDir = f
		}, ErrDirMissing, "not a directory"},
		{"when the plugin binary is not in the image", func(t *testing.T, h hostRoot, o *Options) {
			o.PluginSrc = filepath.Join(h.image, "nope")
		}, ErrPluginSourceMissing, "image/nope"},
		{"when the plugin source is a directory", func(t *testing.T, h hostRoot, o *Options) {
			o.PluginSrc = h.image
		}, ErrPluginSourceMissing, "not a regular file"},
		{"when the conflist is not JSON", func(t *testing.T, h hostRoot, o *Options) {
			o.Conflist = []byte("{not json")
		}, ErrInvalidOptions, "parsing the conflist"},
		{"when the conflist does not name the plugin", func(t *testing.T, h hostRoot, o *Options) {
			o.Conflist = []byte(`{"cniVersion":"1.1.0","name":"x","plugins":[{"type":"bridge"}]}`)
		}, ErrInvalidOptions, `no plugin of type "eniwire"`},
		{"when the conflist name would not be loaded as a chain", func(t *testing.T, h hostRoot, o *Options) {
			o.ConflistName = "10-eniwire.conf"
		}, ErrInvalidOptions, "ending in .conflist"},
		{"when the conflist name is a path", func(t *testing.T, h hostRoot, o *Options) {
			o.ConflistName = "../10-eniwire.conflist"
		}, ErrInvalidOptions, "plain file name"},
		{"when a host dir is not given", func(t *testing.T, h hostRoot, o *Options) {
			o.HostConfDir = ""
		}, ErrInvalidOptions, "HostConfDir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostRoot(t)
			o := h.options(h.plugin(t, "eniwire", []byte("p")), conflist(9001, 0))
			tc.mutate(t, h, &o)
			err := Install(context.Background(), o)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Install = %v, want an error wrapping %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
			// Nothing is half-installed: the conflist never appears without the plugin.
			if _, err := os.Stat(filepath.Join(h.conf, "10-eniwire.conflist")); err == nil {
				t.Errorf("a failed install left a conflist behind")
			}
		})
	}
}

// readOnlyDir returns a directory that refuses writes, holding the files fill writes first: a tmpfs
// remounted read-only as root (root ignores mode bits), a 0555 directory otherwise.
func readOnlyDir(t *testing.T, fill func(dir string)) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), fmt.Sprintf("ro-cniinstall-%d", os.Getpid()))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		fill(d)
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(d, 0o755) })
		return d
	}
	if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(d, syscall.MNT_DETACH) })
	fill(d)
	if err := syscall.Mount("tmpfs", d, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size=1m"); err != nil {
		t.Fatalf("remounting the tmpfs read-only: %v", err)
	}
	return d
}

func TestInstallFailsClearlyWhenAHostDirIsReadOnly(t *testing.T) {
	for _, which := range []string{"bin", "conf"} {
		t.Run("when the "+which+" dir is read-only", func(t *testing.T) {
			h := newHostRoot(t)
			o := h.options(h.plugin(t, "eniwire", []byte("p")), conflist(9001, 0))
			ro := readOnlyDir(t, func(string) {})
			if which == "bin" {
				o.HostBinDir = ro
			} else {
				o.HostConfDir = ro
			}
			err := Install(context.Background(), o)
			if !errors.Is(err, ErrDirNotWritable) {
				t.Fatalf("Install = %v, want an error wrapping ErrDirNotWritable", err)
			}
			if !strings.Contains(err.Error(), ro) || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("error %q does not name the directory and the likely cause", err)
			}
		})
	}
}

func TestUninstallRemovesBothFilesAndToleratesTheirAbsence(t *testing.T) {
	h := newHostRoot(t)
	o := h.options(h.plugin(t, "eniwire", []byte("p")), conflist(9001, 0))
	if err := Install(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := Uninstall(context.Background(), o); err != nil {
			t.Fatalf("uninstall %d: %v", i+1, err)
		}
		assertOnly(t, h.bin)
		assertOnly(t, h.conf)
	}
}

func TestUninstallOnAReadOnlyDir(t *testing.T) {
	t.Run("succeeds when there is nothing to remove", func(t *testing.T) {
		h := newHostRoot(t)
		o := h.options("", nil)
		o.HostConfDir = readOnlyDir(t, func(string) {})
		if err := Uninstall(context.Background(), o); err != nil {
			t.Fatalf("Uninstall with nothing to remove = %v", err)
		}
	})
	t.Run("fails clearly when the conflist cannot be removed", func(t *testing.T) {
		h := newHostRoot(t)
		o := h.options("", nil)
		o.HostConfDir = readOnlyDir(t, func(d string) {
			if err := os.WriteFile(filepath.Join(d, "10-eniwire.conflist"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		})
		err := Uninstall(context.Background(), o)
		if !errors.Is(err, ErrDirNotWritable) || !strings.Contains(err.Error(), o.HostConfDir) {
			t.Fatalf("Uninstall = %v, want ErrDirNotWritable naming %s", err, o.HostConfDir)
		}
	})
}

// The installed file is the real plugin and the host can run it: build cmd/eniwire, install it, and ask it for
// its CNI versions the way a runtime does.
func TestTheInstalledPluginAnswersVERSION(t *testing.T) {
	if testing.Short() && !testenv.InCI() {
		t.Skip("builds the plugin (runs under CI=true even with -short)")
	}
	h := newHostRoot(t)
	src := testenv.Binary(t, "eniwire", "github.com/eniwire/eniwire/cmd/eniwire")
	conf, err := os.ReadFile("../../deploy/10-eniwire.conflist")
	if err != nil {
		t.Fatal(err)
	}
	if err := Install(context.Background(), h.options(src, conf)); err != nil {
		t.Fatal(err)
	}
	run := execCommand(t, filepath.Join(h.bin, "eniwire"))
	run.Env = []string{"CNI_COMMAND=VERSION"}
	run.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	var stdout bytes.Buffer
	run.Stdout, run.Stderr = &stdout, io.Discard
	if err := run.Run(); err != nil {
		t.Fatalf("running the installed plugin: %v", err)
	}
	if !strings.Contains(stdout.String(), `"supportedVersions"`) || !strings.Contains(stdout.String(), `"1.1.0"`) {
		t.Errorf("VERSION printed %q, want supportedVersions including 1.1.0", stdout.String())
	}
}
