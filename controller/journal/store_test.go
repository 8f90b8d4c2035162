package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample(n int) *State {
	st := &State{InstanceID: "i-1"}
	for i := range n {
		st.Assignments = append(st.Assignments, Assignment{ContainerID: "c" + string(rune('a'+i)), IfName: "eth0", IP: "10.0.0." + string(rune('1'+i)), ENI: "eni-1", AssignedAt: time.Unix(100, 0).UTC()})
	}
	st.ENIs = []ENI{{OpID: "op1", ClientToken: "eniwire-op1", ID: "eni-1", State: Ready, IPs: []string{"10.0.0.1"}}}
	st.Cooldowns = []Cooldown{{IP: "10.0.0.9", ENI: "eni-1", Until: time.Unix(200, 0).UTC()}}
	return st
}

func TestSavedStateIsReadBackAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s, st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ENIs) != 0 || st.Version != Version {
		t.Fatalf("new journal state = %+v", st)
	}
	want := sample(3)
	for range 5 {
		if err := s.Save(want); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	_, got, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != want.Seq || len(got.Assignments) != 3 || got.ENIs[0].ClientToken != "eniwire-op1" || !got.Cooldowns[0].Until.Equal(want.Cooldowns[0].Until) {
		t.Fatalf("reopened state = %+v, want %+v", got, want)
	}
	info, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode = %v, %v", info.Mode(), err)
	}
}

func TestDamagedTailFallsBackToLastGoodState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(raw []byte) []byte
	}{
		{"a torn last record", func(raw []byte) []byte { return raw[:len(raw)-7] }},
		{"a flipped byte in the last record", func(raw []byte) []byte {
			out := append([]byte(nil), raw...)
			out[len(out)-10] ^= 0x20
			return out
		}},
		{"garbage appended", func(raw []byte) []byte { return append(raw, []byte("deadbeef 12 {\"x\":1}\n")...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			good := sample(1)
			if err := s.Save(good); err != nil {
				t.Fatal(err)
			}
			newer := sample(2)
			newer.Seq = good.Seq
			if err := s.Save(newer); err != nil {
				t.Fatal(err)
			}
			s.Close()
			path := filepath.Join(dir, FileName)
			raw, _ := os.ReadFile(path)
			if err := os.WriteFile(path, tc.damage(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			s2, got, err := Open(dir, nil)
			if err != nil {
				t.Fatalf("opening damaged journal: %v", err)
			}
			wantN := 1
			if tc.name == "garbage appended" {
				wantN = 2
			}
			if len(got.Assignments) != wantN {
				t.Fatalf("recovered %d assignments, want %d", len(got.Assignments), wantN)
			}
			if !s2.Recovered {
				t.Fatal("Recovered not set")
			}
			// After recovery new writes land on a clean file.
			if err := s2.Save(sample(3)); err != nil {
				t.Fatal(err)
			}
			s2.Close()
			_, again, err := Open(dir, nil)
			if err != nil || len(again.Assignments) != 3 {
				t.Fatalf("after recovery and a save: %v, %d assignments", err, len(again.Assignments))
			}
		})
	}
}

func TestUnusableJournalIsRefusedAndLeftUntouched(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		want    error
	}{
		{"a journal of a future version", "ENIWIRE-JOURNAL v9\n00000000 2 {}\n", ErrUnknownVersion},
		{"a file that is not a journal", "hello world\n", ErrUnreadable},
		{"a journal whose every record is corrupt", "ENIWIRE-JOURNAL v1\n00000000 2 {}\n", ErrUnreadable},
		{"an empty file", "", ErrUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := Open(dir, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open error = %v, want %v", err, tc.want)
			}
			raw, _ := os.ReadFile(path)
			if string(raw) != tc.content {
				t.Fatalf("journal changed to %q", raw)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("directory holds %d entries, want only the journal", len(entries))
			}
		})
	}
}

func TestJournalCompactsWhenItGrows(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := sample(8)
	// Each save changes one assignment by about 1 KiB, so 2000 saves pass compactAt.
	pad := strings.Repeat("x", 1<<10)
	for i := range 2000 {
		st.Assignments[i%8].Netns = fmt.Sprintf("/var/run/netns/%d-%s", i, pad)
		if err := s.Save(st); err != nil {
			t.Fatal(err)
		}
	}
	if s.gen < 2 {
		t.Fatal("the journal was never compacted")
	}
	s.Close()
	info, _ := os.Stat(filepath.Join(dir, FileName))
	if info.Size() > compactAt+8<<10 {
		t.Fatalf("journal is %d bytes, want compaction below %d", info.Size(), compactAt)
	}
	_, got, err := Open(dir, nil)
	if err != nil || got.Seq != st.Seq || got.Assignments[7].Netns != st.Assignments[7].Netns {
		t.Fatalf("reopened seq %d (%v), want %d", got.Seq, err, st.Seq)
	}
}
