// Package conformance runs Kubernetes' own end-to-end suite (e2e.test, built from k8s.io/kubernetes/test/e2e
// at the release test/k8s/go.mod pins) against the test cluster, and reads its JUnit report into a table.
package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Suite is the built suite: e2e.test and the ginkgo CLI that runs it on several processes.
type Suite struct {
	E2ETest, Ginkgo string
}

// Build builds e2e.test and ginkgo into dir from the module in k8sDir (go relinks only what changed) and
// reports each step's time through logf.
func Build(ctx context.Context, k8sDir, dir string, logf func(string, ...any)) (Suite, error) {
	s := Suite{E2ETest: filepath.Join(dir, "e2e.test"), Ginkgo: filepath.Join(dir, "ginkgo")}
	for _, step := range []struct {
		what string
		args []string
	}{
		{"e2e.test (k8s.io/kubernetes/test/e2e)", []string{"test", "-c", "-vet=off", "-trimpath", "-o", s.E2ETest, "k8s.io/kubernetes/test/e2e"}},
		{"the ginkgo CLI", []string{"build", "-trimpath", "-o", s.Ginkgo, "github.com/onsi/ginkgo/v2/ginkgo"}},
	} {
		start := time.Now()
		logf("building %s", step.what)
		cmd := exec.CommandContext(ctx, "go", step.args...)
		cmd.Dir = k8sDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return s, fmt.Errorf("building %s: %w\n%s", step.what, err, out)
		}
		logf("built %s in %s", step.what, time.Since(start).Round(100*time.Millisecond))
	}
	return s, nil
}
