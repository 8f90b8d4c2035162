package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// FileName is the journal's name inside its directory.
const FileName = "journal.log"

// compactAt bounds the file, and so the replay at start: a few thousand delta records.
const compactAt = 1 << 20

// ErrBroken is returned by every call after a write or sync of the journal failed: the store no longer knows
// what the disk holds, and the agent must restart and replay.
var ErrBroken = errors.New("journal is broken by an earlier I/O error")

// Store is an open journal. Its methods are safe for concurrent use; callers serialise changes to the State
// and call Append in the order of their changes.
type Store struct {
	dir    string
	path   string
	log    *slog.Logger
	policy SyncPolicy
	every  time.Duration

	mu   sync.Mutex
	cond *sync.Cond // signalled when synced, broken or the file changes
	f    *os.File
	size int64
	// gen counts rewrites: a sync of a file that a compaction replaced is moot, the compaction synced it.
	gen     uint64
	seq     uint64 // of the last record written
	synced  uint64 // of the last record known durable
	syncing bool
	broken  error
	books   *books
	syncs   atomic.Int64 // fdatasyncs done, for tests and benchmarks
	closed  chan struct{}
	flushed chan struct{}
	// Recovered is true when Open found a torn or corrupt tail and used the last good state.
	Recovered bool
}

// Options tune a Store; the zero value is SyncAlways.
type Options struct {
	Sync SyncPolicy
	// BatchInterval bounds how long a pod record waits for its fdatasync under SyncBatched (default 10 ms).
	BatchInterval time.Duration
}

// Open opens (or creates) the journal in dir with SyncAlways; see OpenWith.
func Open(dir string, log *slog.Logger) (*Store, *State, error) { return OpenWith(dir, log, Options{}) }

// OpenWith opens (or creates) the journal in dir and returns it with the newest valid state (an empty State
// for a new journal). The file is rewritten as one snapshot, so new records never follow a torn one. Errors:
// ErrUnknownVersion and ErrUnreadable (both leave the file untouched), or an I/O error.
func OpenWith(dir string, log *slog.Logger, opt Options) (*Store, *State, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.BatchInterval <= 0 {
		opt.BatchInterval = 10 * time.Millisecond
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating journal directory %s: %w", dir, err)
	}
	s := &Store{dir: dir, path: filepath.Join(dir, FileName), log: log, policy: opt.Sync, every: opt.BatchInterval,
		closed: make(chan struct{}), flushed: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	raw, err := os.ReadFile(s.path)
	var st *State
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st = &State{Version: Version}
	case err != nil:
		return nil, nil, fmt.Errorf("reading journal %s: %w: %w", s.path, ErrUnreadable, err)
	default:
		var torn bool
		st, torn, err = Decode(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("loading journal %s: %w", s.path, err)
		}
		if torn {
			// Keep the damaged file for forensics, then start a clean one from the last good state.
			keep := s.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			if err := os.WriteFile(keep, raw, 0o600); err != nil {
				return nil, nil, fmt.Errorf("keeping corrupt journal copy: %w", err)
			}
			log.Warn("journal had a torn or corrupt tail; using the last good state", "path", s.path, "copy", keep, "seq", st.Seq)
			s.Recovered = true
		}
	}
	s.seq, s.synced = st.Seq, st.Seq
	if err := s.rewriteLocked(st); err != nil {
		return nil, nil, err
	}
	s.books = newBooks(st)
	if s.policy == SyncBatched {
		go s.flusher()
	} else {
		close(s.flushed)
	}
	return s, st, nil
}

// Save makes st the journal's state durably: on return it survives a machine crash. It sets st.Seq.
func (s *Store) Save(st *State) error {
	seq, err := s.Append(st)
	if err != nil {
		return err
	}
	return s.Commit(seq, Durable)
}

// Append writes the change from the last appended state to st (one record, or a snapshot when the file is
// due for compaction) with write(2), sets st.Seq and returns it. On return the record survives a crash of
// the process, not yet of the machine: Commit waits for that. Errors: ErrBroken, or an I/O error (which
// breaks the store).
func (s *Store) Append(st *State) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return 0, errors.New("appending to journal: store is closed")
	}
	if s.broken != nil {
		return 0, fmt.Errorf("appending to journal: %w", s.broken)
	}
	st.Version = Version
	st.Seq = s.seq + 1
	r := s.books.diff(st)
	r.Seq = st.Seq
	if s.size >= compactAt || !s.books.unique(st) {
		if err := s.rewriteLocked(st); err != nil {
			s.broken = fmt.Errorf("%w: %w", ErrBroken, err)
			s.cond.Broadcast()
			return 0, err
		}
		s.books = newBooks(st)
		return st.Seq, nil
	}
	line, err := encodeLine(r)
	if err != nil {
		// The books already moved past what the file holds.
		s.broken = fmt.Errorf("%w: %w", ErrBroken, err)
		s.cond.Broadcast()
		return 0, s.broken
	}
	if _, err := s.f.Write(line); err != nil {
		// A short write may have left part of a record: the next open treats it as a torn tail, and no
		// further record may follow it.
		s.broken = fmt.Errorf("%w: appending to %s: %w", ErrBroken, s.path, err)
		s.cond.Broadcast()
		return 0, s.broken
	}
	s.size += int64(len(line))
	s.seq = st.Seq
	return st.Seq, nil
}

// rewriteLocked replaces the file with a header and a snapshot of st, atomically and durably.
func (s *Store) rewriteLocked(st *State) error {
	st.Version = Version
	line, err := encodeLine(&record{Seq: st.Seq, Snapshot: st})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating journal temp file: %w", err)
	}
	defer os.Remove(tmp.Name())
	buf := append(header(), line...)
	if _, err := tmp.Write(buf); err != nil {
		tmp.Close()
		return fmt.Errorf("writing journal temp file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing journal temp file: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("setting journal mode: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing journal temp file: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("replacing journal %s: %w", s.path, err)
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening journal %s: %w", s.path, err)
	}
	if s.f != nil {
		// A sync running on the old file finishes or fails harmlessly: gen tells it the snapshot covers it.
		s.f.Close()
	}
	s.f = f
	s.gen++
	s.size = int64(len(buf))
	s.seq, s.synced = st.Seq, st.Seq
	s.cond.Broadcast()
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening journal directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing journal directory: %w", err)
	}
	return nil
}

// Path is the journal file's path.
func (s *Store) Path() string { return s.path }

// Close makes every written record durable and closes the journal file.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.f == nil {
		s.mu.Unlock()
		return nil
	}
	seq := s.seq
	s.mu.Unlock()
	err := s.Commit(seq, Durable)
	s.mu.Lock()
	for s.syncing {
		s.cond.Wait()
	}
	if s.f == nil {
		s.mu.Unlock()
		return nil
	}
	close(s.closed)
	cerr := s.f.Close()
	s.f = nil
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.flushed
	if err != nil && !errors.Is(err, ErrBroken) {
		return err
	}
	return cerr
}
