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

// Cleanup removes what clusters named with prefix left under tmpDir: it kills their processes (pid files),
// deletes their network namespaces, their nodes' cgroups and their scratch dirs. It reports what it found.
func Cleanup(prefix, tmpDir string) ([]string, error) {
	dirs, _ := filepath.Glob(filepath.Join(tmpDir, prefix+"*"))
	var found []string
	for _, d := range dirs {
		if killed := killPIDFiles(d); len(killed) > 0 {
			found = append(found, fmt.Sprintf("%s: killed %s", filepath.Base(d), strings.Join(killed, ", ")))
		}
	}
	if len(found) > 0 {
		time.Sleep(time.Second) // the kernel reaps the killed processes and empties their cgroups
	}
	var errs []error
	if err := vpcfabric.Cleanup(prefix); err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		nodes, _ := os.ReadDir(filepath.Join(d, "nodes"))
		for _, n := range nodes {
			removeCgroupRoot(cgroupName(n.Name()))
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
		} else {
			found = append(found, "removed "+d)
		}
	}
	return found, errors.Join(errs...)
}
