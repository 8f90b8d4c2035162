package agent_test

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/eniwire/eniwire/controller/agent"
)

// TestTheSocketNeverAppearsWithAWiderMode: the API socket is created with its final mode, so there is no
// moment in which a process of another user could connect. Under umask 0 a socket bound in place and then
// chmod'ed shows mode 0777 for a moment; a watcher polling the path must never see it.
func TestTheSocketNeverAppearsWithAWiderMode(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "run", "agent.sock")
	var (
		stop  atomic.Bool
		wider atomic.Uint32
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for !stop.Load() {
			if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 && fi.Mode().Perm() != 0o600 {
				wider.Store(uint32(fi.Mode().Perm()))
			}
		}
	})
	for range 500 {
		l, err := agent.ListenSocket(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	stop.Store(true)
	wg.Wait()
	if m := wider.Load(); m != 0 {
		t.Fatalf("the socket was seen with mode %#o before it had its final mode 0600", m)
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("the socket's directory is %#o: others may replace the socket", fi.Mode().Perm())
	}
}
