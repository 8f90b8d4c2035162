// Package testenv holds what tests share about the machine they run on: whether they may use root,
// BPF and network namespaces. Under CI=true a missing capability fails the test; elsewhere it skips.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true), where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable fails the test in CI and skips it elsewhere, saying why.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required under CI=true: %s", why)
	}
	t.Skipf("skipping: %s", why)
}

// RequireRoot needs uid 0 (network namespaces, BPF, netlink changes).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "test needs root")
	}
}

// RequireTool needs an executable on PATH and returns its path.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, name+" is not installed (make test installs it)")
	}
	return p
}
