package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/agent"
	"github.com/eniwire/eniwire/controller/journal"
)

// syncFailsAtPlan is the node's journal whose fdatasync fails for the first record that plans an ENI; from
// then on, as with the real store, every write and commit fails.
type syncFailsAtPlan struct {
	inner controller.Journal

	mu      sync.Mutex
	planSeq uint64
	broken  atomic.Bool
}

var errEIO = errors.New("fdatasync journal.log: input/output error")

func (j *syncFailsAtPlan) Append(st *journal.State) (uint64, error) {
	if j.broken.Load() {
		return 0, fmt.Errorf("%w: %w", journal.ErrBroken, errEIO)
	}
	seq, err := j.inner.Append(st)
	if err != nil {
		return seq, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range st.ENIs {
		if e.State == journal.Planned && j.planSeq == 0 {
			j.planSeq = seq
		}
	}
	return seq, nil
}

func (j *syncFailsAtPlan) Commit(seq uint64, d journal.Durability) error {
	if j.broken.Load() {
		return fmt.Errorf("%w: %w", journal.ErrBroken, errEIO)
	}
	j.mu.Lock()
	fail := j.planSeq != 0 && seq >= j.planSeq
	j.mu.Unlock()
	if fail {
		j.broken.Store(true)
		return fmt.Errorf("%w: %w", journal.ErrBroken, errEIO)
	}
	return j.inner.Commit(seq, d)
}

// TestABrokenJournalStopsTheNode: after a failed fdatasync the journal refuses every write. The node must not
// carry on as if healthy: /healthz fails, Run returns an error (the agent exits non-zero and the DaemonSet
// restarts it to replay what the disk holds), and no EC2 call runs for the record that never reached the disk.
func TestABrokenJournalStopsTheNode(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	j := &syncFailsAtPlan{}
	node := w.sw.NewNodeWith(t, fastConfig(w.dir), controller.Deps{EC2: w.ec2(nil),
		WrapJournal: func(inner controller.Journal) controller.Journal { j.inner = inner; return j }})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
		node.Close()
	})
	ops := httptest.NewServer(agent.OpsHandler(node, prometheus.NewRegistry()))
	t.Cleanup(ops.Close)

	waitReady(t, node)
	// One pod leaves the primary short of a whole free ENI: WARM_ENI_TARGET=1 plans a secondary ENI, and that
	// record's sync fails.
	eventually(t, 20*time.Second, "the planned ENI's fdatasync to fail", func() error {
		if !j.broken.Load() {
			_, _ = node.Assign(context.Background(), assignReq("pod-0"))
			return errors.New("not yet")
		}
		return nil
	})
	w.passVirtual(time.Minute, nil)
	if n := w.sim.Counters()["CreateNetworkInterface"].Calls; n != 0 {
		t.Errorf("CreateNetworkInterface called %d times for an ENI plan that never reached the disk", n)
	}
	resp, err := http.Get(ops.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("/healthz = %d with a broken journal, want a failure", resp.StatusCode)
	}
	select {
	case err := <-ran:
		if err == nil || !errors.Is(err, journal.ErrBroken) {
			t.Errorf("Run returned %v, want an error wrapping journal.ErrBroken", err)
		}
		ran <- err // for the clean-up
	case <-time.After(2 * time.Second):
		t.Errorf("Run still running a minute (virtual) after the journal broke")
	}
}
