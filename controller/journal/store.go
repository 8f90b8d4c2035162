package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The journal is one append-only file. Its first line names the format and version; every further line is a
// complete State: "<crc32c hex> <length> <json>". Appending one line and fdatasync'ing it is the cheapest
// durable write (one sync, no rename), which keeps a pod assignment under a millisecond. The newest line whose
// checksum holds is the state, so a torn or corrupt tail falls back to the last good state. When the file grows
// past compactAt it is rewritten with the newest state alone: temp file, fsync, rename, fsync of the directory.

// FileName is the journal's name inside its directory.
const FileName = "journal.log"

const (
	magic     = "ENIWIRE-JOURNAL"
	compactAt = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrUnknownVersion is returned by Open for a journal written by another format version.
var ErrUnknownVersion = errors.New("journal has an unknown format version")

// ErrUnreadable is returned by Open for a journal that exists but holds no valid state.
var ErrUnreadable = errors.New("journal cannot be read")

// Store is an open journal. Save is safe for concurrent use, but callers serialise changes to the State.
type Store struct {
	mu   sync.Mutex
	dir  string
	path string
	f    *os.File
	size int64
	log  *slog.Logger
	// Recovered is true when Open found a torn or corrupt tail and used the last good state.
	Recovered bool
}

// Open opens (or creates) the journal in dir and returns it with the newest valid state (an empty State for a
// new journal). Errors: ErrUnknownVersion and ErrUnreadable (both leave the file untouched), or an I/O error.
func Open(dir string, log *slog.Logger) (*Store, *State, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating journal directory %s: %w", dir, err)
	}
	s := &Store{dir: dir, path: filepath.Join(dir, FileName), log: log}
	raw, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st := &State{Version: Version}
		if err := s.rewrite(st); err != nil {
			return nil, nil, err
		}
		return s, st, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading journal %s: %w: %w", s.path, ErrUnreadable, err)
	}
	st, torn, err := Decode(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("loading journal %s: %w", s.path, err)
	}
	if torn {
		// Keep the damaged file for forensics, then start a clean one from the last good state, so that a new
		// line is never glued to a torn one.
		keep := s.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := os.WriteFile(keep, raw, 0o600); err != nil {
			return nil, nil, fmt.Errorf("keeping corrupt journal copy: %w", err)
		}
		log.Warn("journal had a torn or corrupt tail; using the last good state", "path", s.path, "copy", keep, "seq", st.Seq)
		s.Recovered = true
	}
	if err := s.rewrite(st); err != nil {
		return nil, nil, err
	}
	return s, st, nil
}

// Decode parses a journal file's bytes: the newest valid state, and whether any line was torn or corrupt.
// Errors: ErrUnknownVersion, ErrUnreadable.
func Decode(raw []byte) (*State, bool, error) {
	header, rest, ok := bytes.Cut(raw, []byte("\n"))
	if !ok {
		return nil, false, fmt.Errorf("%w: no header line", ErrUnreadable)
	}
	name, ver, _ := bytes.Cut(header, []byte(" "))
	if string(name) != magic {
		return nil, false, fmt.Errorf("%w: header %.40q is not an eniwire journal", ErrUnreadable, header)
	}
	if v, err := strconv.Atoi(string(bytes.TrimPrefix(ver, []byte("v")))); err != nil || v != Version {
		return nil, false, fmt.Errorf("%w: %q (this build reads v%d)", ErrUnknownVersion, ver, Version)
	}
	var best *State
	torn := false
	sc := bufio.NewScanner(bytes.NewReader(rest))
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for sc.Scan() {
		st, err := decodeLine(sc.Bytes())
		if err != nil {
			torn = true
			continue
		}
		if st.Version != Version {
			return nil, false, fmt.Errorf("%w: record of version %d", ErrUnknownVersion, st.Version)
		}
		best = st // appends are in order: the last valid line is the newest state
	}
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		torn = true
	}
	if best == nil {
		return nil, false, fmt.Errorf("%w: no record passes its checksum", ErrUnreadable)
	}
	return best, torn, nil
}

func decodeLine(line []byte) (*State, error) {
	sum, rest, ok1 := bytes.Cut(line, []byte(" "))
	n, body, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 {
		return nil, errors.New("malformed record")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil {
		return nil, err
	}
	length, err := strconv.Atoi(string(n))
	if err != nil || length != len(body) {
		return nil, errors.New("record length mismatch")
	}
	if crc32.Checksum(body, castagnoli) != uint32(want) {
		return nil, errors.New("record checksum mismatch")
	}
	st := &State{}
	if err := json.Unmarshal(body, st); err != nil {
		return nil, err
	}
	return st, nil
}

func encodeLine(st *State) ([]byte, error) {
	body, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding journal state: %w", err)
	}
	out := make([]byte, 0, len(body)+24)
	out = fmt.Appendf(out, "%08x %d ", crc32.Checksum(body, castagnoli), len(body))
	out = append(out, body...)
	return append(out, '\n'), nil
}

// Save makes st the journal's state durably: on return it survives a crash. It bumps st.Seq.
func (s *Store) Save(st *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("saving journal: store is closed")
	}
	st.Version = Version
	st.Seq++
	if s.size >= compactAt {
		return s.rewrite(st)
	}
	line, err := encodeLine(st)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("appending to journal %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("syncing journal %s: %w", s.path, err)
	}
	s.size += int64(len(line))
	return nil
}

// rewrite replaces the file with a header and st alone, atomically.
func (s *Store) rewrite(st *State) error {
	st.Version = Version
	line, err := encodeLine(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating journal temp file: %w", err)
	}
	defer os.Remove(tmp.Name())
	buf := append([]byte(magic+" v"+strconv.Itoa(Version)+"\n"), line...)
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
		s.f.Close()
	}
	s.f = f
	s.size = int64(len(buf))
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

// Close closes the journal file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Read returns the newest valid state of the journal at path without opening it for writing (eniwirectl).
func Read(path string) (*State, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("opening journal %s: %w", path, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, false, fmt.Errorf("reading journal %s: %w", path, err)
	}
	return Decode(raw)
}
