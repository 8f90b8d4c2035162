package simnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/eniwire/eniwire/internal/testenv"
)

// Binaries are eniwire's executables a simulated node runs: the agent, the CNI plugin and eniwirectl.
type Binaries struct {
	// Dir holds all three; it doubles as a CNI bin dir (the plugin is named "eniwire").
	Dir, Agent, Plugin, Ctl string
}

// ErrMissingBinary is returned by FindBinaries when a directory lacks one of the executables.
var ErrMissingBinary = errors.New("binary missing")

func binariesIn(dir string) Binaries {
	return Binaries{Dir: dir, Agent: filepath.Join(dir, "eniwire-agent"), Plugin: filepath.Join(dir, "eniwire"),
		Ctl: filepath.Join(dir, "eniwirectl")}
}

// FindBinaries returns the executables in dir (e.g. `make build`'s bin/), or ErrMissingBinary.
func FindBinaries(dir string) (Binaries, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, fmt.Errorf("resolving %s: %w", dir, err)
	}
	b := binariesIn(abs)
	for _, p := range []string{b.Agent, b.Plugin, b.Ctl} {
		if _, err := os.Stat(p); err != nil {
			return Binaries{}, fmt.Errorf("finding %s: %w", p, ErrMissingBinary)
		}
	}
	return b, nil
}

// BuildBinaries builds cmd/eniwire-agent, cmd/eniwire and cmd/eniwirectl from this module into dir, as the
// Dockerfile builds them for the image: static, without the symbol table and DWARF (-s -w; a smaller plugin
// starts about 0.2 ms sooner, which the ADD benchmarks should see as it ships). It must run from inside the
// module (tests and `go run` do).
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, fmt.Errorf("resolving %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("making %s: %w", abs, err)
	}
	const mod = "github.com/eniwire/eniwire/cmd/"
	args := append(append([]string{"build"}, testenv.BuildFlags...), "-o", abs+string(filepath.Separator),
		mod+"eniwire-agent", mod+"eniwire", mod+"eniwirectl")
	build := exec.CommandContext(ctx, "go", args...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("building the agent, the plugin and eniwirectl: %w\n%s", err, msg)
	}
	return binariesIn(abs), nil
}

// ModuleRoot is the directory of this module's go.mod, found from the working directory up (tests run in
// their package's directory, the demo from the repository's root).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/eniwire/eniwire\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding the module root: no eniwire go.mod above the working directory")
		}
		dir = parent
	}
}

// Prebuilt returns the run's binaries in ENIWIRE_TEST_BIN (built once by `make test` for every harness), ok
// false when that is unset, or an error when it lacks one of them.
func Prebuilt() (b Binaries, ok bool, err error) {
	dir, err := testenv.BinDir()
	if err != nil || dir == "" {
		return Binaries{}, false, err
	}
	if b, err = FindBinaries(dir); err != nil {
		return Binaries{}, false, fmt.Errorf("%s: %w", testenv.BinDirEnv, err)
	}
	return b, true, nil
}

// BuildTemp returns the binaries for a whole package's tests: the run's prebuilt ones (Prebuilt), or, without
// them, builds them into a new temporary dir (named after pattern, as os.MkdirTemp); remove deletes what it
// built. Give it a context without a short deadline: a cold build on a busy machine takes minutes.
func BuildTemp(ctx context.Context, pattern string) (b Binaries, remove func(), err error) {
	if b, ok, err := Prebuilt(); err != nil || ok {
		return b, func() {}, err
	}
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return Binaries{}, nil, fmt.Errorf("making the bin dir: %w", err)
	}
	remove = func() { os.RemoveAll(dir) }
	if b, err = BuildBinaries(ctx, dir); err != nil {
		remove()
		return Binaries{}, nil, err
	}
	return b, remove, nil
}
