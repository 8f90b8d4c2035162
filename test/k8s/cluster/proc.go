package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one long-running program of the cluster (etcd, the API server, containerd, a kubelet...),
// entered into a node's network and mount namespaces, logging to <dir>/<name>.log, its pid in
// <dir>/<name>.pid so that Cleanup finds it after a crash of the harness.
type Process struct {
	Name    string
	LogPath string
	pidPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Namespaces say where a process runs: a network namespace path and the pid of a process whose mount and
// UTS namespaces it joins (0: the harness's own).
type Namespaces struct {
	NetnsPath string
	MountPID  int
}

// Command prepares argv inside the namespaces, through nsenter, so the process and all it starts (shims,
// plugins) live there.
func (n Namespaces) Command(ctx context.Context, argv ...string) *exec.Cmd {
	pre := []string{"nsenter"}
	if n.NetnsPath != "" {
		pre = append(pre, "--net="+n.NetnsPath)
	}
	if n.MountPID != 0 {
		pre = append(pre, fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.MountPID), fmt.Sprintf("--uts=/proc/%d/ns/uts", n.MountPID))
	}
	if len(pre) == 1 {
		return exec.CommandContext(ctx, argv[0], argv[1:]...)
	}
	pre = append(pre, "--")
	return exec.CommandContext(ctx, pre[0], append(pre[1:], argv...)...)
}

// Start runs argv in ns with env added to the harness's environment.
func Start(dir, name string, ns Namespaces, env []string, argv ...string) (*Process, error) {
	p := &Process{Name: name, LogPath: filepath.Join(dir, name+".log"), pidPath: filepath.Join(dir, name+".pid"), done: make(chan struct{})}
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s's log: %w", name, err)
	}
	p.cmd = ns.Command(context.Background(), argv...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Its own process group, so a Ctrl-C meant for the harness reaches it only through Stop.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	if err := os.WriteFile(p.pidPath, []byte(strconv.Itoa(p.cmd.Process.Pid)), 0o644); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Running says whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited is closed when the process exits.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group and SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	_ = os.Remove(p.pidPath)
	return nil
}

// Tail is the last n lines of the log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, n) }

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every 200 ms until it holds, p exits (when p is not nil) or ctx ends; the error names
// what was awaited and carries the last condition error.
func waitFor(ctx context.Context, what string, p *Process, cond func() error) error {
	var last error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if last = cond(); last == nil {
			return nil
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-exited:
			return fmt.Errorf("waiting for %s: %s exited (%v); its log ends:\n%s", what, p.Name, p.err, p.Tail(30))
		case <-tick.C:
		}
	}
}

// killPIDFiles kills (SIGKILL, whole group) every process whose pid file lies under dir: what a killed
// harness left running.
func killPIDFiles(dir string) (killed []string) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".pid") {
			return nil
		}
		b, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			if syscall.Kill(-pid, syscall.SIGKILL) == nil || syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, filepath.Base(path))
			}
		}
		return nil
	})
	return killed
}

// killCgroup kills every process in the cgroup dir and below it (a node's pods' containers).
func killCgroup(dir string) (killed int) {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		return nil
	})
	return killed
}

// killMentioning kills every process whose command line mentions both strings: the runtime's shims, which
// leave containerd's process tree and keep no pid file of ours.
func killMentioning(path, also string) (killed int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), path) && strings.Contains(string(cmdline), also) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}
