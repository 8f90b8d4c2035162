package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

const (
	// probeEvery is how often a prober opens a connection; it is the resolution of the times it reports.
	probeEvery = 10 * time.Millisecond
	// probeWait is how long an attempt waits for the peer's SYN-ACK or RST before it counts as dropped.
	probeWait = 100 * time.Millisecond
)

// attempt is one connection attempt of a prober: when its SYN left, whether it is over and whether the
// peer's stack answered.
type attempt struct {
	sent           time.Time
	done, answered bool
}

// prober opens a TCP connection from a network namespace to addr every probeEvery, each on its own without
// waiting for the ones before, so the packets themselves say from when a policy lets them through: an
// attempt is answered when the connection opens or is refused (the peer's stack sent a SYN-ACK or a RST,
// so the SYN got there and the answer came back), unanswered when probeWait passes first.
type prober struct {
	what     string
	mu       sync.Mutex
	attempts []*attempt // in the order they were sent
	stop     chan struct{}
	done     sync.WaitGroup
}

func startProber(what, netns, addr string) *prober {
	p := &prober{what: what, stop: make(chan struct{})}
	dial := vpcfabric.DialContext(netns)
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for {
			a := &attempt{}
			p.mu.Lock()
			a.sent = time.Now()
			p.attempts = append(p.attempts, a)
			p.mu.Unlock()
			p.done.Add(1)
			go func() {
				defer p.done.Done()
				ctx, cancel := context.WithTimeout(context.Background(), probeWait)
				defer cancel()
				conn, err := dial(ctx, "tcp", addr)
				if err == nil {
					conn.Close()
				}
				p.mu.Lock()
				a.done, a.answered = true, err == nil || errors.Is(err, syscall.ECONNREFUSED)
				p.mu.Unlock()
			}()
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// finish stops the prober and waits for its attempts in flight.
func (p *prober) finish() {
	close(p.stop)
	p.done.Wait()
}

// settled returns when the first run of `run` consecutive attempts sent at or after since began whose
// outcome is answered, and whether there is one yet among the attempts that are over.
func (p *prober) settled(since time.Time, answered bool, run int) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.attempts), func(i int) bool { return !p.attempts[i].sent.Before(since) })
	first, n := 0, 0
	for j := i; j < len(p.attempts); j++ {
		a := p.attempts[j]
		if !a.done {
			return time.Time{}, false
		}
		if a.answered != answered {
			n = 0
			continue
		}
		if n == 0 {
			first = j
		}
		if n++; n == run {
			return p.attempts[first].sent, true
		}
	}
	return time.Time{}, false
}

// waitSettled waits until settled finds its run, at most within, and returns how long after since the
// run's first SYN left.
func (p *prober) waitSettled(since time.Time, answered bool, run int, within time.Duration) (time.Duration, error) {
	deadline := since.Add(within)
	for {
		if at, ok := p.settled(since, answered, run); ok {
			return at.Sub(since), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: not %s %d times in a row within %s", p.what, map[bool]string{true: "answered", false: "dropped"}[answered], run, within)
		}
		time.Sleep(probeEvery / 2)
	}
}

// The prober times a flip as the packets show it, without the cluster: in a network namespace of its own, a
// prober sends to 127.0.0.1:9 while an nftables rule drops what comes in for that port; the rule is flushed
// (the stack refuses the port: answered) and added again (dropped). Each flip must be seen, timed from when
// it was made, within a second.
func TestTheProberTimesAFlip(t *testing.T) {
	testenv.RequireRoot(t)
	ip := testenv.RequireTool(t, "ip")
	testenv.RequireTool(t, "nft")
	name := fmt.Sprintf("eniwire-prober-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", name)
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "delete", name).Run() })
	run("-n", name, "link", "set", "lo", "up")
	nft := func(cmd string) { run("netns", "exec", name, "nft", cmd) }
	nft("add table inet prober; add chain inet prober in { type filter hook input priority 0; }")
	drop := "add rule inet prober in tcp dport 9 drop"
	nft(drop)

	p := startProber("to 127.0.0.1:9", "/run/netns/"+name, "127.0.0.1:9")
	defer p.finish()
	if _, err := p.waitSettled(time.Now(), false, droppedRun, 5*time.Second); err != nil {
		t.Fatalf("with the drop rule: %v", err)
	}
	for _, flip := range []struct {
		nft      string
		answered bool
		run      int
	}{{"flush chain inet prober in", true, 1}, {drop, false, droppedRun}} {
		start := time.Now()
		nft(flip.nft)
		d, err := p.waitSettled(start, flip.answered, flip.run, 5*time.Second)
		if err != nil {
			t.Fatalf("nft %s: %v", flip.nft, err)
		}
		if d > time.Second {
			t.Errorf("nft %s: seen %s after, want within 1s", flip.nft, d)
		}
		t.Logf("nft %s: seen %s after", flip.nft, d)
	}
}
