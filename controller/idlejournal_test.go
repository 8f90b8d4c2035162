package controller_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/simworld"
)

// countingJournal counts the records appended to the journal it wraps.
type countingJournal struct {
	inner   controller.Journal
	appends atomic.Int64
}

func (j *countingJournal) Append(st *journal.State) (uint64, error) {
	j.appends.Add(1)
	return j.inner.Append(st)
}

func (j *countingJournal) Commit(seq uint64, d journal.Durability) error {
	return j.inner.Commit(seq, d)
}

// TestAnIdleNodeWritesNoJournalRecordPerPoolRound: once the pool is at its targets, an idle node journals only
// what changes; its pool rounds (one a second here) write nothing. Issue 36 item 20: an idle IPv6 or dual-stack
// node appended and fsync'd an empty record every round, 54 a virtual minute (IPv4: 1).
func TestAnIdleNodeWritesNoJournalRecordPerPoolRound(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func(dir string) controller.Config
	}{{"IPv4", fastConfig}, {"IPv6", ipv6Config}, {"dual-stack", dualStackConfig}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 20, DualStack: true})
			j := &countingJournal{}
			r := w.startWith(c.cfg(w.dir), controller.Deps{
				WrapJournal: func(inner controller.Journal) controller.Journal { j.inner = inner; return j }})
			waitReady(t, r.node)
			eventually(t, 30*time.Second, "the pool at its targets", func() error {
				if s := r.node.Status(); s.Warm == 0 || len(s.Pending) > 0 {
					return fmt.Errorf("%d warm, %d pending", s.Warm, len(s.Pending))
				}
				return nil
			})
			before, start := j.appends.Load(), w.clk.Now()
			time.Sleep(3 * time.Second) // a virtual minute: 60 pool rounds
			appended, took := j.appends.Load()-before, w.clk.Since(start)
			// A reconcile may correct something once; a record per round would be one a virtual second.
			if limit := int64(took/(20*time.Second)) + 2; appended > limit {
				t.Fatalf("%d journal records in %s of virtual idle time, want at most %d (none per pool round)", appended, took.Round(time.Second), limit)
			}
			t.Logf("%d journal records in %s of virtual idle time", appended, took.Round(time.Second))
		})
	}
}
