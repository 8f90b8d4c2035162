package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
)

// Binaries are the programs the test cluster runs, built from source.
type Binaries struct {
	Kube    string // the multi-call Kubernetes binary (test/k8s/cmd/kube)
	CoreDNS string
	Agnhost string
	Pause   string
	// Eniwire holds eniwire-agent, eniwire and eniwirectl as the Dockerfile builds them; EniwireNext the same
	// with another version stamp, for the rolling-update case.
	Eniwire, EniwireNext string
	// EniwireVersion and EniwireNextVersion are what their eniwirectl version prints.
	EniwireVersion, EniwireNextVersion string
}

// Build builds every binary into dir (go build relinks only what changed, so a warm build takes seconds)
// and reports each step's time through logf. The first build on a fresh machine compiles Kubernetes. When the
// run has built eniwire's binaries and pause already (ENIWIRE_TEST_BIN, `make test-bin`), it takes those.
func Build(ctx context.Context, repoRoot, dir string, logf func(string, ...any)) (Binaries, error) {
	b := Binaries{
		Kube: filepath.Join(dir, "kube"), CoreDNS: filepath.Join(dir, "coredns"), Agnhost: filepath.Join(dir, "agnhost"),
		Pause: filepath.Join(dir, "pause"), Eniwire: filepath.Join(dir, "eniwire"), EniwireNext: filepath.Join(dir, "eniwire-next"),
	}
	type step struct {
		what, dir, out string
		args           []string
	}
	steps := []step{{"Kubernetes " + KubernetesVersion + " (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl, etcd), CoreDNS and agnhost",
		filepath.Join(repoRoot, "test", "k8s"), dir + "/", []string{"-ldflags", kubeVersionFlags(), "./cmd/kube", "./cmd/coredns", "k8s.io/kubernetes/test/images/agnhost"}}}
	prebuilt, err := testenv.BinDir()
	if err != nil {
		return b, err
	}
	if prebuilt != "" {
		b.Pause, b.Eniwire, b.EniwireNext = filepath.Join(prebuilt, "pause"), prebuilt, filepath.Join(prebuilt, "next")
		logf("eniwire's binaries and pause: the run's, in %s", prebuilt)
	} else {
		steps = append(steps,
			step{"the pause image's binary", repoRoot, b.Pause, []string{"./test/cri/pause"}},
			step{"eniwire (as the Dockerfile builds it)", repoRoot, b.Eniwire + "/", eniwireArgs("k8s-test")},
			step{"eniwire, a second version for the rolling update", repoRoot, b.EniwireNext + "/", eniwireArgs("k8s-test-next")})
	}
	for _, s := range steps {
		start := time.Now()
		logf("building %s", s.what)
		cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-trimpath", "-o", s.out}, s.args...)...)
		cmd.Dir = s.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("building %s: %w\n%s", s.what, err, out)
		}
		logf("built %s in %s", s.what, time.Since(start).Round(100*time.Millisecond))
	}
	for _, v := range []struct {
		dir string
		to  *string
	}{{b.Eniwire, &b.EniwireVersion}, {b.EniwireNext, &b.EniwireNextVersion}} {
		out, err := exec.CommandContext(ctx, filepath.Join(v.dir, "eniwirectl"), "version").Output()
		if err != nil {
			return b, fmt.Errorf("%s/eniwirectl version: %w", v.dir, err)
		}
		*v.to = strings.TrimSpace(string(out))
	}
	if b.EniwireVersion == b.EniwireNextVersion {
		return b, fmt.Errorf("%s and %s carry one version, %s: the rolling update needs two", b.Eniwire, b.EniwireNext, b.EniwireVersion)
	}
	return b, nil
}

// KubernetesVersion is the release test/k8s/go.mod pins (k8s.io/kubernetes); the binaries report it.
const KubernetesVersion = "v1.34.2"

// kubeVersionFlags stamp the version as the Kubernetes build does, so nodes and `kubectl version` show it.
func kubeVersionFlags() string {
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, "-X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=34 -X %[1]s.gitTreeState=clean ", pkg, KubernetesVersion)
	}
	return strings.TrimSpace(b.String())
}

// eniwireArgs are the Dockerfile's build flags for eniwire's three binaries.
func eniwireArgs(version string) []string {
	return []string{"-ldflags", "-s -w -X github.com/eniwire/eniwire/internal/version.Version=" + version,
		"./cmd/eniwire-agent", "./cmd/eniwire", "./cmd/eniwirectl"}
}

// RepoRoot finds the eniwire repository from the working directory (the directory holding the Dockerfile and
// the root go.mod).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/eniwire/eniwire\n") {
			return d, nil
		}
	}
	return "", fmt.Errorf("no eniwire repository above %s", dir)
}

// CacheDir is where built binaries stay between runs.
func CacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "eniwire-k8s", "bin")
	}
	return filepath.Join(os.TempDir(), "eniwire-k8s", "bin")
}
