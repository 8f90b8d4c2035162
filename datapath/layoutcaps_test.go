package datapath

import (
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/bpf"
)

// withoutSysAdmin runs f on a thread whose effective capabilities lack CAP_SYS_ADMIN, as the agent's
// container has them (CAP_BPF and CAP_NET_ADMIN, not CAP_SYS_ADMIN); the capability is raised again after,
// and the thread, whose state the test changed, is not given back to the runtime if that fails.
func withoutSysAdmin(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			t.Errorf("capget: %v", err)
			return
		}
		saved := data
		data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			t.Errorf("dropping CAP_SYS_ADMIN: %v", err)
			return
		}
		f()
		if err := unix.Capset(&hdr, &saved[0]); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// TestAPinnedMapIsKeptWhenItsBTFCannotBeOpened: opening a map's BTF by id needs CAP_SYS_ADMIN, which the
// agent's container lacks. A pinned map whose sizes match is then kept, not judged incompatible: a
// restarted agent must not replace (and empty) every map the running pods depend on.
func TestAPinnedMapIsKeptWhenItsBTFCannotBeOpened(t *testing.T) {
	root := testPinRoot(t)
	m := pinOldMap(t, root, func(*ebpf.MapSpec) {})
	spec, err := bpf.LoadEniwire()
	if err != nil {
		t.Fatal(err)
	}
	var judged error
	withoutSysAdmin(t, func() { judged = pinnedLayoutDiffers(m, spec.Maps[bpf.EniwireMapPods]) })
	if judged != nil {
		t.Fatalf("a pinned pods map of the same layout, judged without CAP_SYS_ADMIN: %v, want it kept", judged)
	}
}
