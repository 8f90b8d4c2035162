package simnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// Cleanup removes what nodes named with prefix left behind when their process died before Close (or was
// told to keep them): it ends their agents (by the pid file, only if that pid still runs eniwire-agent),
// deletes their netns (fabric and pods, with every link inside), unmounts their bpffs (and with it every
// pin) and removes their scratch dirs under tmpDir (default os.TempDir()). It returns what it removed.
func Cleanup(prefix, tmpDir string) ([]string, error) {
	if prefix == "" {
		return nil, errors.New("cleaning up: empty prefix would match everything")
	}
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	var removed []string
	var errs []error
	dirs, _ := filepath.Glob(filepath.Join(tmpDir, prefix+"*"))
	for _, dir := range dirs {
		if pid := agentPID(filepath.Join(dir, "agent.pid")); pid > 0 {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				removed = append(removed, fmt.Sprintf("agent pid %d", pid))
			}
		}
	}
	if names, err := netnsNames(prefix); err == nil {
		removed = append(removed, names...)
	}
	if err := vpcfabric.Cleanup(prefix); err != nil {
		errs = append(errs, err)
	}
	for _, dir := range dirs {
		for _, m := range mountsUnder(dir) {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			} else {
				removed = append(removed, "mount "+m)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
		} else {
			removed = append(removed, dir)
		}
	}
	return removed, errors.Join(errs...)
}

// agentPID reads a pid file and returns the pid only if that process is an eniwire-agent.
func agentPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != "eniwire-agent" {
		return 0
	}
	return pid
}

func netnsNames(prefix string) ([]string, error) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, "netns "+e.Name())
		}
	}
	return out, nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
