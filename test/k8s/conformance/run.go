package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// RunOptions choose the specs and where their output goes.
type RunOptions struct {
	Kubeconfig  string
	Focus, Skip string // ginkgo regular expressions over the specs' full text
	Procs       int    // specs run on this many processes ([Serial] ones alone, at the end)
	NumNodes    int
	Timeout     time.Duration
	// Dir receives e2e.log (everything the suite printed) and junit.xml.
	Dir string
	// Progress receives a line each time a spec finishes, and every few minutes while none does.
	Progress func(format string, args ...any)
}

// Run runs the suite's chosen specs against the cluster and returns their results from the JUnit report. A
// suite that ran and had failures is no error: the results say which failed.
func (s Suite) Run(ctx context.Context, o RunOptions) ([]Result, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(o.Dir, "e2e.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{"--procs=" + strconv.Itoa(o.Procs), "--no-color", "--silence-skips", "--timeout=" + o.Timeout.String(),
		"--focus=" + o.Focus, "--junit-report=junit.xml", "--output-dir=" + o.Dir}
	if o.Skip != "" {
		args = append(args, "--skip="+o.Skip)
	}
	args = append(args, s.E2ETest, "--", "--kubeconfig="+o.Kubeconfig, "--provider=local",
		"--num-nodes="+strconv.Itoa(o.NumNodes), "--system-pods-startup-timeout=5m")
	cmd := exec.CommandContext(ctx, s.Ginkgo, args...)
	cmd.Dir = o.Dir
	// Interrupted, ginkgo stops the specs and still writes the report of those that ran.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting ginkgo: %w", err)
	}
	follow(io.TeeReader(out, log), o.Progress)
	runErr := cmd.Wait()
	results, err := ReadJUnit(filepath.Join(o.Dir, "junit.xml"))
	if err != nil {
		return nil, fmt.Errorf("the suite left no report (%v; its output is in %s): %w", runErr, logPath, err)
	}
	return results, nil
}

var willRun = regexp.MustCompile(`Will run (\d+) of (\d+) specs`)

// follow reads the suite's output until it ends and reports progress: ginkgo prints a "•" as each spec
// finishes (a bare one for a pass, unterminated, so several share a line) and "Will run N of M specs" at
// the start.
func follow(r io.Reader, progress func(string, ...any)) {
	start := time.Now()
	done, total := 0, "?"
	tokens := make(chan string)
	go func() {
		defer close(tokens)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		sc.Split(linesAndBullets)
		for sc.Scan() {
			tokens <- sc.Text()
		}
	}()
	tick := time.NewTicker(3 * time.Minute)
	defer tick.Stop()
	for {
		select {
		case tok, ok := <-tokens:
			if !ok {
				return
			}
			if m := willRun.FindStringSubmatch(tok); m != nil {
				total = m[1]
				progress("running %s of the suite's %s specs", m[1], m[2])
			}
			if strings.TrimSpace(tok) == bullet {
				done++
				progress("%d/%s specs done after %s", done, total, time.Since(start).Round(time.Second))
			}
		case <-tick.C:
			progress("%d/%s specs done after %s, still running", done, total, time.Since(start).Round(time.Second))
		}
	}
}

const bullet = "•"

// linesAndBullets splits output into lines, and ends a token after every "•" too.
func linesAndBullets(data []byte, atEOF bool) (int, []byte, error) {
	nl, b := bytes.IndexByte(data, '\n'), bytes.Index(data, []byte(bullet))
	switch {
	case b >= 0 && (nl < 0 || b < nl):
		return b + len(bullet), data[:b+len(bullet)], nil
	case nl >= 0:
		return nl + 1, data[:nl], nil
	case atEOF && len(data) > 0:
		return len(data), data, nil
	}
	return 0, nil, nil
}
