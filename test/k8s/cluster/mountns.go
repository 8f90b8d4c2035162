package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// nodePaths are the host paths a Kubernetes node and eniwire's DaemonSet use. Each node of the test cluster
// sees its own directory of its scratch dir at these paths, through bind mounts in a mount namespace of its
// own (the kubelet, containerd, the runtime's shims and the CNI plugins all run in it), so two nodes on one
// machine do not share CNI dirs, eniwire's journal or socket, and nothing lands on the machine's own paths.
// The machine keeps only the empty mount points the harness may have had to create.
var nodePaths = []string{
	"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/cni", "/var/lib/eniwire", "/run/eniwire", "/var/log/eniwire",
	"/var/log/pods", "/var/log/containers", "/var/lib/kubelet",
	// The runtime's pod network namespaces are bind mounts on files here: the node's own, not the machine's.
	"/run/netns",
}

// MountNS is a node's mount namespace, held open by a process that sleeps in it. It is a slave of the
// machine's (mounts made on the machine, such as new network namespaces, appear in it; none of its own leave
// it) and shared inside, as kubelet and containerd's CRI expect of the paths they mount from. A bpffs of its
// own at /sys/fs/bpf holds the node's pins; they go with the namespace.
type MountNS struct {
	holder *Process
	Root   string // the node's directory; Root+path is what the node sees at path
}

// PID is the holder's pid: nsenter --mount=/proc/PID/ns/mnt --uts=/proc/PID/ns/uts enters the namespaces.
func (m *MountNS) PID() int { return m.holder.cmd.Process.Pid }

// NewMountNS makes root/<path> for every node path, the mount points on the machine where missing, and
// starts the holder, which mounts them and a bpffs and then sleeps. The holder also holds a UTS namespace
// whose hostname is the node's, as an instance's is: hostNetwork pods share it (their hostname is the node's).
func NewMountNS(ctx context.Context, dir, root, hostname string) (*MountNS, error) {
	var script strings.Builder
	fmt.Fprintf(&script, "set -e\nhostname %q\nmount --make-rshared /\nmount -t bpf -o mode=0700 bpf /sys/fs/bpf\n", hostname)
	for _, p := range nodePaths {
		if err := os.MkdirAll(root+p, 0o755); err != nil {
			return nil, fmt.Errorf("making %s: %w", root+p, err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("making the mount point %s: %w", p, err)
		}
		fmt.Fprintf(&script, "mount --bind %q %q\n", root+p, p)
	}
	ready := filepath.Join(dir, "mountns.ready")
	_ = os.Remove(ready)
	fmt.Fprintf(&script, "touch %q\nexec sleep infinity\n", ready)
	holder, err := Start(dir, "mountns", Namespaces{}, nil, "unshare", "--mount", "--uts", "--propagation", "slave", "sh", "-c", script.String())
	if err != nil {
		return nil, err
	}
	m := &MountNS{holder: holder, Root: root}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitFor(wctx, "the node's mount namespace", holder, func() error {
		_, err := os.Stat(ready)
		return err
	}); err != nil {
		_ = holder.Stop(time.Second)
		return nil, err
	}
	return m, nil
}

// Close ends the holder; the namespace goes when its last process (kubelet, containerd, shims) has exited.
func (m *MountNS) Close() error { return m.holder.Stop(time.Second) }
