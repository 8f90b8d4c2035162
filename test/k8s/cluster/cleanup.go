package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// cgroupPrefix starts every node's cgroup root; the cluster's name follows.
const cgroupPrefix = "eniwire-"

// Cleanup removes what clusters named with prefix left under tmpDir: it kills their processes (pid files,
// the runtimes' shims, whatever runs in their nodes' cgroups), deletes their network namespaces, their nodes'
// cgroups and their scratch dirs. It reports what it found.
func Cleanup(prefix, tmpDir string) ([]string, error) {
	if prefix == "" {
		return nil, fmt.Errorf("cleaning up: an empty prefix would match everything")
	}
	dirs, _ := filepath.Glob(filepath.Join(tmpDir, prefix+"*"))
	var found []string
	for _, d := range dirs {
		if killed := killPIDFiles(d); len(killed) > 0 {
			found = append(found, fmt.Sprintf("%s: killed %s", filepath.Base(d), strings.Join(killed, ", ")))
		}
	}
	if n := killMentioning(filepath.Join(tmpDir, prefix), "/nodes/"); n > 0 {
		found = append(found, fmt.Sprintf("killed %d container runtime shims", n))
	}
	cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", cgroupPrefix+prefix+"*"))
	for _, cg := range cgroups {
		if n := killCgroup(cg); n > 0 {
			found = append(found, fmt.Sprintf("%s: killed %d processes", filepath.Base(cg), n))
		}
	}
	if len(found) > 0 {
		time.Sleep(time.Second) // the kernel reaps the killed processes and empties their cgroups
	}
	var errs []error
	if err := vpcfabric.Cleanup(prefix); err != nil {
		errs = append(errs, err)
	}
	for _, cg := range cgroups {
		removeCgroupRoot(filepath.Base(cg))
		found = append(found, "removed the cgroups "+filepath.Base(cg))
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
		} else {
			found = append(found, "removed "+d)
		}
	}
	return found, errors.Join(errs...)
}
