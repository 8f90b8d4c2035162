package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/eniwire/eniwire/controller/journal"
)

// Journal is where the books are made durable, in two steps so that the books' lock is not held across an
// fsync and concurrent changes share one (group commit). *journal.Store implements it.
type Journal interface {
	// Append writes the change to st and returns its sequence number.
	Append(st *journal.State) (uint64, error)
	// Commit returns when record seq is as durable as d asks under the journal's policy.
	Commit(seq uint64, d journal.Durability) error
}

// books is the node's journaled state. Who may touch it: anyone, through its methods, and ipam, which holds mu
// across a read and the change that depends on it (appendLocked). st is read and changed only under mu, and
// every change is appended to the journal before mu is released.
type books struct {
	journal Journal

	mu sync.Mutex
	st *journal.State
	// seq is the newest journal record written (under mu): a repeated request waits for its commit.
	seq uint64

	// broken is the first failure of the journal. From then on the memory may hold changes the disk does not,
	// so the books take no change, the node makes no EC2 call, and Run returns it: the agent exits and its
	// restart replays what the disk holds. onBroken is told once (it logs and wakes the Run loop).
	broken   atomic.Pointer[error]
	onBroken func(error)
}

// Broken returns the journal failure that stopped the books, or nil.
func (b *books) Broken() error {
	if p := b.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records err as the journal failure that stops the books.
func (b *books) fail(err error) {
	if b.broken.CompareAndSwap(nil, &err) && b.onBroken != nil {
		b.onBroken(err)
	}
}

// Update implements eni.Books: fn changes the state and the result is durable (fsync'd, whatever the sync
// policy) before Update returns, since the ENI commit makes its EC2 call next. The lock is released during
// the fsync, so concurrent commits share one.
func (b *books) Update(_ context.Context, fn func(st *journal.State) error) error {
	b.mu.Lock()
	seq, err := b.appendLocked(fn)
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return b.commit(seq, journal.Durable)
}

// appendLocked applies fn and writes the change to the journal (b.mu held). When fn or the write fails the
// state is as before. The change is visible to other holders of the lock from here on, though not yet
// durable: readers may act on it only in ways that a lost change cannot make wrong (answering a pod waits for
// its own commit; an EC2 call follows only a commit of its own).
func (b *books) appendLocked(fn func(st *journal.State) error) (uint64, error) {
	if err := b.Broken(); err != nil {
		return 0, fmt.Errorf("writing journal: %w", err)
	}
	before := b.st.Clone()
	if err := fn(b.st); err != nil {
		*b.st = *before
		return 0, err
	}
	seq, err := b.journal.Append(b.st)
	if err != nil {
		*b.st = *before
		err = fmt.Errorf("writing journal: %w", err)
		b.fail(err)
		return 0, err
	}
	b.seq = max(b.seq, seq)
	return seq, nil
}

// commit waits until record seq is as durable as d asks. Seq 0 (nothing written since the books were read
// from the disk) is durable already.
func (b *books) commit(seq uint64, d journal.Durability) error {
	if seq == 0 {
		return nil
	}
	if err := b.journal.Commit(seq, d); err != nil {
		err = fmt.Errorf("committing journal: %w", err)
		b.fail(err)
		return err
	}
	return nil
}

// View implements eni.Books.
func (b *books) View(fn func(st *journal.State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
}

// Snapshot returns a copy of the books.
func (b *books) Snapshot() *journal.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st.Clone()
}
