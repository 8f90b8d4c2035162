package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestASaveWritesOnlyTheChange(t *testing.T) {
	for _, n := range []int{10, 500} {
		t.Run(fmt.Sprintf("with %d assignments held", n), func(t *testing.T) {
			s, _, err := Open(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			st := sample(n)
			if err := s.Save(st); err != nil {
				t.Fatal(err)
			}
			before := s.size
			st.Assignments = append(st.Assignments, Assignment{ContainerID: "new", IfName: "eth0", IP: "10.0.3.3", ENI: "eni-1"})
			if err := s.Save(st); err != nil {
				t.Fatal(err)
			}
			if grew := s.size - before; grew > 400 {
				t.Fatalf("adding one assignment wrote %d bytes", grew)
			}
		})
	}
}

func TestReplayOfDeltasGivesTheSavedState(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := sample(5)
	steps := []func(){
		func() { st.ENIs[0].State = Attached },
		func() { st.ENIs = append(st.ENIs, ENI{OpID: "op2", State: Planned, IPs: []string{"10.0.0.50"}}) },
		func() { st.ENIs[1].IPs = append(st.ENIs[1].IPs, "10.0.0.51") },
		func() { st.Assignments = st.Assignments[1:] },
		func() { st.Cooldowns = nil },
		func() { st.IPOps = []IPOp{{OpID: "ip1", Kind: AssignIPs, ENI: "eni-1", Count: 3}} },
		func() { st.IPOps = nil; st.ENIs = st.ENIs[:1] },
		func() { st.InstanceID = "i-2" },
		func() {
			st.Unassigned = []Unassigned{{IP: "10.0.0.60", ENI: "eni-1", At: time.Unix(300, 0).UTC()}, {IP: "10.0.0.61", ENI: "eni-1"}}
		},
		func() { st.Unassigned = st.Unassigned[1:] },
	}
	for _, step := range steps {
		step()
		if err := s.Save(st); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	got, torn, err := Read(filepath.Join(dir, FileName))
	if err != nil || torn {
		t.Fatalf("reading back: %v (torn %v)", err, torn)
	}
	want, _ := encodeLine(st)
	have, _ := encodeLine(got)
	if !bytes.Equal(want, have) {
		t.Fatalf("replayed state\n%s\nwant\n%s", have, want)
	}
}

func TestARecordOutOfSequenceEndsTheReplay(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := sample(1)
	if err := s.Save(st); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, FileName)
	line, _ := encodeLine(&record{Seq: st.Seq + 2, Assignments: []Assignment{{ContainerID: "x", IfName: "eth0", IP: "10.0.0.99"}}})
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(line)
	f.Close()
	got, torn, err := Read(path)
	if err != nil || !torn || len(got.Assignments) != 1 {
		t.Fatalf("replay with a gap: %v, torn %v, %d assignments; want the state before the gap", err, torn, len(got.Assignments))
	}
}

func TestAVersion1JournalIsReadAndRewritten(t *testing.T) {
	dir := t.TempDir()
	old := sample(2)
	old.Version, old.Seq = 1, 7
	line, _ := encodeLine(old)
	if err := os.WriteFile(filepath.Join(dir, FileName), append([]byte("ENIWIRE-JOURNAL v1\n"), line...), 0o600); err != nil {
		t.Fatal(err)
	}
	s, st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Seq != 7 || len(st.Assignments) != 2 || st.Version != Version {
		t.Fatalf("v1 state = seq %d, %d assignments, version %d", st.Seq, len(st.Assignments), st.Version)
	}
	s.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !bytes.HasPrefix(raw, []byte(fmt.Sprintf("ENIWIRE-JOURNAL v%d\n", Version))) {
		t.Fatalf("journal not rewritten as v%d: %.30q", Version, raw)
	}
}

func TestConcurrentCommitsShareFsyncs(t *testing.T) {
	s, _, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	st := sample(3)
	var wg sync.WaitGroup
	const writers, each = 8, 50
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				mu.Lock()
				st.Cooldowns = append(st.Cooldowns[:0], Cooldown{IP: fmt.Sprintf("10.1.%d.%d", w, i), ENI: "eni-1"})
				seq, err := s.Append(st)
				mu.Unlock()
				if err == nil {
					err = s.Commit(seq, Durable)
				}
				if err != nil {
					t.Error(err)
					return
				}
				s.mu.Lock()
				durable := s.synced >= seq
				s.mu.Unlock()
				if !durable {
					t.Errorf("commit of %d returned before it was synced", seq)
				}
			}
		})
	}
	wg.Wait()
	if syncs := s.syncs.Load(); syncs >= writers*each {
		t.Fatalf("%d fsyncs for %d commits: none shared", syncs, writers*each)
	}
}

func TestBatchedPolicy(t *testing.T) {
	s, _, err := OpenWith(t.TempDir(), nil, Options{Sync: SyncBatched, BatchInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := sample(2)
	t.Run("a pod record is in the file when Commit returns and synced within the interval", func(t *testing.T) {
		seq, err := s.Append(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(seq, Pod); err != nil {
			t.Fatal(err)
		}
		got, _, err := Read(s.Path())
		if err != nil || got.Seq != seq {
			t.Fatalf("file holds seq %d (%v), want %d", got.Seq, err, seq)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.mu.Lock()
			synced := s.synced
			s.mu.Unlock()
			if synced >= seq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("pod record never synced")
			}
			time.Sleep(time.Millisecond)
		}
	})
	t.Run("a durable record is synced before Commit returns", func(t *testing.T) {
		st.ENIs[0].State = Attached
		seq, err := s.Append(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(seq, Durable); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.synced < seq {
			t.Fatalf("synced %d after a durable commit of %d", s.synced, seq)
		}
	})
}
