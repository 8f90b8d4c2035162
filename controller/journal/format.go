package journal

// The journal file's format (see the package comment): a header line naming the format and its version, then
// one record a line, "<crc32c hex> <length> <json>". This file encodes and decodes it; record.go says what a
// record holds and store.go writes the file.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
)

const magic = "ENIWIRE-JOURNAL"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrUnknownVersion is returned by Open for a journal written by another format version.
var ErrUnknownVersion = errors.New("journal has an unknown format version")

// ErrUnreadable is returned by Open for a journal that exists but holds no valid state.
var ErrUnreadable = errors.New("journal cannot be read")

// header is the file's first line: the format's name and this build's version.
func header() []byte { return []byte(magic + " v" + strconv.Itoa(Version) + "\n") }

// Decode parses a journal file's bytes: the newest valid state, and whether any record was torn or corrupt.
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
	v, err := strconv.Atoi(string(bytes.TrimPrefix(ver, []byte("v"))))
	if err != nil || (v != Version && v != 1) {
		return nil, false, fmt.Errorf("%w: %q (this build reads v1 and v%d)", ErrUnknownVersion, ver, Version)
	}
	if v == 1 {
		return decodeV1(rest)
	}
	var st *State
	torn := false
	sc := bufio.NewScanner(bytes.NewReader(rest))
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for sc.Scan() {
		var r record
		if err := decodeLine(sc.Bytes(), &r); err != nil || (st == nil && r.Snapshot == nil) || (st != nil && r.Seq != st.Seq+1) {
			// A delta cannot be skipped: everything after the first bad record is the torn tail.
			torn = true
			break
		}
		if st == nil {
			st = &State{}
		}
		r.apply(st)
	}
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		torn = true
	}
	if st == nil {
		return nil, false, fmt.Errorf("%w: no record passes its checksum", ErrUnreadable)
	}
	return st, torn, nil
}

// decodeV1 reads the first format: every line a whole state, the last valid one the newest.
func decodeV1(rest []byte) (*State, bool, error) {
	var best *State
	torn := false
	sc := bufio.NewScanner(bytes.NewReader(rest))
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for sc.Scan() {
		st := &State{}
		if err := decodeLine(sc.Bytes(), st); err != nil {
			torn = true
			continue
		}
		if st.Version != 1 {
			return nil, false, fmt.Errorf("%w: record of version %d", ErrUnknownVersion, st.Version)
		}
		best = st
	}
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		torn = true
	}
	if best == nil {
		return nil, false, fmt.Errorf("%w: no record passes its checksum", ErrUnreadable)
	}
	best.Version = Version
	return best, torn, nil
}

func decodeLine(line []byte, v any) error {
	sum, rest, ok1 := bytes.Cut(line, []byte(" "))
	n, body, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 {
		return errors.New("malformed record")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil {
		return err
	}
	length, err := strconv.Atoi(string(n))
	if err != nil || length != len(body) {
		return errors.New("record length mismatch")
	}
	if crc32.Checksum(body, castagnoli) != uint32(want) {
		return errors.New("record checksum mismatch")
	}
	return json.Unmarshal(body, v)
}

func encodeLine(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding journal record: %w", err)
	}
	out := make([]byte, 0, len(body)+24)
	out = fmt.Appendf(out, "%08x %d ", crc32.Checksum(body, castagnoli), len(body))
	out = append(out, body...)
	return append(out, '\n'), nil
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
