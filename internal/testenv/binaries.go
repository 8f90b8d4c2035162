package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BinDirEnv names the directory holding eniwire's executables built once for a whole test run (`make test`
// builds them into bin/test before any test starts): eniwire-agent, eniwire (the CNI plugin), eniwirectl,
// ec2sim and pause, with the Dockerfile's flags, and in next/ the first three again with another version
// stamp. Harnesses use them instead of building their own; without it, each builds what it needs.
const BinDirEnv = "ENIWIRE_TEST_BIN"

// BinDir returns ENIWIRE_TEST_BIN as an absolute path, or "" when it is unset.
func BinDir() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", BinDirEnv, dir, err)
	}
	return abs, nil
}

// BuildFlags are the Dockerfile's `go build` flags but the version stamp (-ldflags changes only the link,
// so builds with these flags share every compiled package with the image's build and with each other).
var BuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// Binary returns the executable name of the run's ENIWIRE_TEST_BIN, or, when that is unset, builds pkg (an
// import path of this module) with BuildFlags into a temporary directory of t. A set ENIWIRE_TEST_BIN that
// lacks name fails the test: a run that built its binaries must not test others. The build has no deadline
// but the test's own: on a loaded machine with a cold cache it takes minutes.
func Binary(t testing.TB, name, pkg string) string {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v (make test-bin builds it)", BinDirEnv, err)
		}
		return p
	}
	out := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", append(append([]string{"build"}, BuildFlags...), "-o", out, pkg)...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, msg)
	}
	return out
}
