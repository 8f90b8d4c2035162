package journal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// SyncPolicy says when pod records reach the disk (see the package comment).
type SyncPolicy int

const (
	// SyncAlways: every record is fdatasync'd before Commit returns.
	SyncAlways SyncPolicy = iota
	// SyncBatched: pod records are written before Commit returns and fdatasync'd within the batch interval;
	// Durable records are still fdatasync'd before Commit returns.
	SyncBatched
)

// ParseSyncPolicy reads "always" or "batched" (ENIWIRE_JOURNAL_SYNC).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "always":
		return SyncAlways, nil
	case "batched":
		return SyncBatched, nil
	}
	return 0, fmt.Errorf("journal sync policy %q: want always or batched", s)
}

func (p SyncPolicy) String() string {
	if p == SyncBatched {
		return "batched"
	}
	return "always"
}

// Durability is what a caller needs of one record before it acts on it.
type Durability int

const (
	// Durable: on the disk, whatever the policy; for records that guard an EC2 call.
	Durable Durability = iota
	// Pod: per the store's policy; for pod assignments, releases and cooldown expiry.
	Pod
)

// Commit returns when the record seq (from Append) is as durable as d and the policy ask. Concurrent commits
// share one fdatasync: the first caller that finds no sync running syncs everything written so far; the others
// wait for it. Errors: ErrBroken once a sync failed.
func (s *Store) Commit(seq uint64, d Durability) error {
	if d == Pod && s.policy == SyncBatched {
		// Written with write(2) by Append: the flusher makes it durable within the batch interval.
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncLocked(seq)
}

// syncLocked waits (s.mu held, released while syncing) until seq is durable.
func (s *Store) syncLocked(seq uint64) error {
	for s.synced < seq {
		if s.broken != nil {
			return fmt.Errorf("committing journal record %d: %w", seq, s.broken)
		}
		if s.f == nil {
			return errors.New("committing journal record: store is closed")
		}
		if s.syncing {
			s.cond.Wait()
			continue
		}
		s.syncing = true
		f, gen, target := s.f, s.gen, s.seq
		s.mu.Unlock()
		err := fdatasync(f)
		s.syncs.Add(1)
		s.mu.Lock()
		s.syncing = false
		switch {
		case gen != s.gen:
			// A compaction replaced the file while we synced; it made everything up to its snapshot durable.
		case err != nil:
			s.broken = fmt.Errorf("%w: syncing %s: %w", ErrBroken, s.path, err)
			s.log.Error("journal sync failed; the agent must restart", "path", s.path, "error", err)
		case target > s.synced:
			s.synced = target
		}
		s.cond.Broadcast()
	}
	return nil
}

// flusher makes pod records durable within the batch interval under SyncBatched.
func (s *Store) flusher() {
	defer close(s.flushed)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.f != nil && s.broken == nil && s.synced < s.seq {
			_ = s.syncLocked(s.seq)
		}
		s.mu.Unlock()
	}
}

// fdatasync flushes the file's data and the metadata needed to read it back (its size), not its times:
// enough for an append-only file, and cheaper than fsync.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// Policy is the store's sync policy.
func (s *Store) Policy() SyncPolicy { return s.policy }
