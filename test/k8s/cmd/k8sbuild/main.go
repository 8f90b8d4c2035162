// Command k8sbuild builds everything the test cluster and the conformance run need (Kubernetes, CoreDNS,
// agnhost, e2e.test and ginkgo; eniwire's binaries and pause unless ENIWIRE_TEST_BIN holds them) into the
// cache the cluster reads (cluster.CacheDir), and exits. `make test` runs it, niced, beside the root
// packages' tests, so the clusters that follow find a warm build; on its own it is `make k8s-build`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/k8s/conformance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "k8sbuild:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("k8sbuild: %s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context) error {
	start := time.Now()
	repo, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	dir := cluster.CacheDir()
	if _, err := cluster.Build(ctx, repo, dir, logf); err != nil {
		return err
	}
	if _, err := conformance.Build(ctx, filepath.Join(repo, "test", "k8s"), dir, logf); err != nil {
		return err
	}
	logf("everything built into %s in %s", dir, time.Since(start).Round(time.Second))
	return nil
}
