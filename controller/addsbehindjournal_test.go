package controller_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/journal"
)

// stallJournal is the node's journal whose next write, once armed, waits until released: a journal write slow
// under a loaded disk, which holds the books' lock meanwhile.
type stallJournal struct {
	controller.Journal
	armed   chan struct{}
	entered chan struct{}
	release chan struct{}
	once    *sync.Once
}

func (j stallJournal) Append(st *journal.State) (uint64, error) {
	select {
	case <-j.armed:
		j.once.Do(func() {
			close(j.entered)
			<-j.release
		})
	default:
	}
	return j.Journal.Append(st)
}

// TestADDsHeldUpBehindASlowJournalWriteCountAsWaiting: ADDs that wait for the books' lock (held by a slow
// journal write) are pods waiting for an IP. Counted as none, the pool saw no demand and released as surplus
// the prefixes they came for (a 300-node rollout-prefix fleet under CPU starvation: hundreds of
// UnassignPrivateIpAddresses while pods waited, thousands of pods without an IP at the end).
func TestADDsHeldUpBehindASlowJournalWriteCountAsWaiting(t *testing.T) {
	w := newWorld(t, "m5.large", 50)
	j := stallJournal{armed: make(chan struct{}), entered: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}}
	r := w.start(prefixConfig(w.dir), nil, func(inner controller.Journal) controller.Journal { j.Journal = inner; return j })
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the warm prefix", func() error {
		if s := r.node.Status(); s.Warm < 16 || len(s.Pending) > 0 {
			return fmt.Errorf("%d warm, %d pending", s.Warm, len(s.Pending))
		}
		return nil
	})
	close(j.armed)
	first := addAsync(r.node, "slow-write")
	<-j.entered // the first ADD's assignment is being written, under the books' lock
	const behind = 5
	answers := make([]<-chan addAnswer, behind)
	for i := range answers {
		answers[i] = addAsync(r.node, fmt.Sprint("behind-", i))
	}
	// Status reads the ADDs waiting before it needs the books' lock; it answers once the write is done.
	time.Sleep(300 * time.Millisecond) // wall time for the ADDs to reach the lock
	status := make(chan int, 1)
	go func() { status <- r.node.Status().AddsWaiting }()
	time.Sleep(100 * time.Millisecond)
	close(j.release)
	got := <-status
	if a := answer(t, "the ADD whose write was slow", first); a.err != nil {
		t.Fatalf("the ADD whose write was slow: %v", a.err)
	}
	for i, ch := range answers {
		if a := answer(t, fmt.Sprint("ADD ", i, " behind the write"), ch); a.err != nil {
			t.Fatalf("ADD %d behind the write: %v", i, a.err)
		}
	}
	if got != behind {
		t.Fatalf("%d ADDs waiting while %d waited for the books behind a slow journal write; want %d", got, behind, behind)
	}
}
