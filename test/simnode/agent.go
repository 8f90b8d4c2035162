package simnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eniwire/eniwire/controller/api"
)

// Errors callers branch on.
var (
	// ErrAgentExited: the agent process ended while the harness waited for it.
	ErrAgentExited = errors.New("agent exited")
	// ErrAgentRunning: Start was called while the agent runs.
	ErrAgentRunning = errors.New("agent already running")
	// ErrNoSample: the metric is not in /metrics (yet).
	ErrNoSample = errors.New("sample not found")
)

// AgentConfig says how to run one eniwire-agent: the executable, its environment and how its process gets
// into the node's network namespace.
type AgentConfig struct {
	Binary string
	// Dir holds the agent's state dir, log and pid file; Socket is its API socket (short: sockaddr_un).
	Dir, Socket string
	// Env is the agent's settings ("NAME=value"), appended to the process's environment.
	Env []string
	// Command makes the process (e.g. `ip netns exec`); nil: exec.Command.
	Command func(name string, args ...string) *exec.Cmd
	// Start starts a prepared process (e.g. from a thread inside the node netns); nil: cmd.Start.
	Start func(*exec.Cmd) error
	// HTTP reaches MetricsURL (the agent's /metrics and /readyz); empty MetricsURL: no metrics.
	HTTP       *http.Client
	MetricsURL string
	// ConfDir, when set, is the CNI conf dir the agent installs its conflist into once ready; Start waits for it.
	ConfDir string
	Logger  *slog.Logger
}

// Agent is one eniwire-agent process that can be started, stopped, killed and restarted over the same
// state dir, as a node's DaemonSet pod would be.
type Agent struct {
	cfg    AgentConfig
	Client *api.Client
	// LogPath is the agent's output across all its runs.
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
}

// NewAgent prepares an agent; nothing runs until Start.
func NewAgent(cfg AgentConfig) *Agent {
	if cfg.Command == nil {
		cfg.Command = exec.Command
	}
	if cfg.Start == nil {
		cfg.Start = (*exec.Cmd).Start
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, Client: api.NewClient(cfg.Socket), LogPath: filepath.Join(cfg.Dir, "agent.log")}
}

// Socket is the agent's API socket.
func (a *Agent) Socket() string { return a.cfg.Socket }

// StateDir is the agent's journal directory.
func (a *Agent) StateDir() string { return filepath.Join(a.cfg.Dir, "state") }

// PIDFile holds the running agent's pid, so a cleanup after a crash of the harness can end it.
func (a *Agent) PIDFile() string { return filepath.Join(a.cfg.Dir, "agent.pid") }

// Env is the agent's settings, for running eniwirectl or `eniwire-agent uninstall` alike.
func (a *Agent) Env() []string {
	return append([]string{"ENIWIRE_STATE_DIR=" + a.StateDir(), "ENIWIRE_SOCKET=" + a.cfg.Socket}, a.cfg.Env...)
}

// SetEnv changes settings ("NAME=value") for the agent's next Start, as an operator edits the DaemonSet; a
// later value of a name wins over an earlier one in the process's environment.
func (a *Agent) SetEnv(kv ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg.Env = append(a.cfg.Env, kv...)
}

// Running reports whether the agent process is alive.
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmd != nil
}

// PID is the running agent's process id (0 when stopped).
func (a *Agent) PID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// Start runs the agent and waits until it is ready: its status says so, it holds at least warm free IPs,
// and (with a ConfDir) the conflist is installed. ctx bounds the wait, not the agent's life.
func (a *Agent) Start(ctx context.Context, warm int) error {
	if err := a.launch(); err != nil {
		return err
	}
	return a.WaitReady(ctx, warm)
}

// StartAnswering runs the agent and waits only until it answers on its socket, ready or not.
func (a *Agent) StartAnswering(ctx context.Context) error {
	if err := a.launch(); err != nil {
		return err
	}
	return a.waitStatus(ctx, "to answer", func(*api.Status) string { return "" })
}

// launch starts the agent's process.
func (a *Agent) launch() error {
	a.mu.Lock()
	if a.cmd != nil {
		a.mu.Unlock()
		return ErrAgentRunning
	}
	logf, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.mu.Unlock()
		return fmt.Errorf("opening the agent log: %w", err)
	}
	cmd := a.cfg.Command(a.cfg.Binary)
	cmd.Env = append(cmd.Environ(), a.Env()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := a.cfg.Start(cmd); err != nil {
		a.mu.Unlock()
		logf.Close()
		return fmt.Errorf("starting the agent: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	a.cmd, a.done = cmd, done
	a.mu.Unlock()
	_ = os.WriteFile(a.PIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	a.cfg.Logger.Info("agent started", "pid", cmd.Process.Pid)
	return nil
}

// WaitReady waits until the running agent is ready with at least warm free IPs (and its conflist installed).
func (a *Agent) WaitReady(ctx context.Context, warm int) error {
	return a.waitStatus(ctx, "to be ready", func(st *api.Status) string {
		switch {
		case !st.Ready || st.Warm < warm:
			return fmt.Sprintf("ready %v (%s), %d warm, pool %q", st.Ready, st.Reason, st.Warm, st.PoolStatus)
		case a.cfg.ConfDir != "" && !exists(filepath.Join(a.cfg.ConfDir, "10-eniwire.conflist")):
			return "ready, conflist not installed yet"
		}
		return ""
	})
}

// waitStatus waits until the running agent answers with a status for which missing says nothing is missing.
func (a *Agent) waitStatus(ctx context.Context, what string, missing func(*api.Status) string) error {
	var last string
	for {
		a.mu.Lock()
		done := a.done
		a.mu.Unlock()
		if done == nil {
			return fmt.Errorf("waiting for the agent: %w", ErrAgentExited)
		}
		select {
		case err := <-done:
			a.forget()
			return fmt.Errorf("waiting for the agent: %w (%v)\n%s", ErrAgentExited, err, a.LogTail(20))
		default:
		}
		if st, err := a.status(ctx); err != nil {
			last = err.Error()
		} else if last = missing(st); last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the agent %s (last: %s): %w\n%s", what, last, ctx.Err(), a.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *Agent) status(ctx context.Context) (*api.Status, error) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return a.Client.Status(c)
}

// Status is the agent's status through its API.
func (a *Agent) Status(ctx context.Context) (*api.Status, error) {
	st, err := a.status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the agent's status: %w", err)
	}
	return st, nil
}

func (a *Agent) forget() {
	a.mu.Lock()
	a.cmd, a.done = nil, nil
	a.mu.Unlock()
	_ = os.Remove(a.PIDFile())
}

// Stop sends sig and waits for the agent to exit (SIGKILL after 30s). A stopped agent is not an error; an
// agent that exits non-zero on SIGTERM is, and SIGKILL's exit status is expected.
func (a *Agent) Stop(sig syscall.Signal) error {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		err = fmt.Errorf("the agent ignored %v for 30s: %v", sig, <-done)
	}
	a.forget()
	a.cfg.Logger.Info("agent stopped", "pid", cmd.Process.Pid, "signal", sig.String())
	if sig == syscall.SIGKILL {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stopping the agent with %v: %w", sig, err)
	}
	return nil
}

// Kill ends the agent with SIGKILL, as an OOM kill or a node crash would: no shutdown code runs.
func (a *Agent) Kill() error { return a.Stop(syscall.SIGKILL) }

// Uninstall runs `eniwire-agent uninstall` with the agent's settings (the agent must be stopped).
func (a *Agent) Uninstall(ctx context.Context) (string, error) {
	cmd := a.cfg.Command(a.cfg.Binary, "uninstall")
	cmd.Env = append(cmd.Environ(), a.Env()...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := a.cfg.Start(cmd); err != nil {
		return "", fmt.Errorf("running eniwire-agent uninstall: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("running eniwire-agent uninstall: %w", err)
	}
	return out.String(), nil
}

// Log is what the agent wrote so far.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

// LogTail is the agent log's last n lines.
func (a *Agent) LogTail(n int) string { return tail(a.Log(), n) }

// Metrics is the agent's /metrics page.
func (a *Agent) Metrics(ctx context.Context) (string, error) {
	if a.cfg.MetricsURL == "" {
		return "", fmt.Errorf("reading metrics: %w", ErrNoSample)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.MetricsURL+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := a.cfg.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading metrics: %w", err)
	}
	return string(b), nil
}

// Metric is one sample of /metrics by name and label set as printed (`program="from_pod",verdict="pass"`;
// "" for none), or an error wrapping ErrNoSample.
func (a *Agent) Metric(ctx context.Context, name, labels string) (float64, error) {
	page, err := a.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %q: %w", line, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("finding %s in /metrics: %w", want, ErrNoSample)
}

// MetricLines are the samples of /metrics whose name starts with one of prefixes, in page order.
func (a *Agent) MetricLines(ctx context.Context, prefixes ...string) ([]string, error) {
	page, err := a.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return out, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
