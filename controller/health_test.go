package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// noInterfaces is a datapath that finds no ENI's interface: it can wire no pod.
type noInterfaces struct{ dptypes.NoDriver }

func (noInterfaces) ENIUp(_ context.Context, e dptypes.ENI) error {
	return fmt.Errorf("finding the interface of ENI %s (MAC %s): no such device", e.ID, e.MAC)
}

// TestStatusSaysWhetherTheJournalAndTheDatapathWork: the status carries what the plugin's STATUS fails on
// besides readiness (no ADD can work), and only that; a late secondary interface is not among it.
func TestStatusSaysWhetherTheJournalAndTheDatapathWork(t *testing.T) {
	health := func(n *controller.Node) (string, string) { st := n.Status(); return st.Journal, st.Datapath }

	t.Run("the datapath brings no ENI up", func(t *testing.T) {
		w := newWorld(t, "m5.large", 200)
		node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: noInterfaces{}}).node
		waitReady(t, node)
		eventually(t, 20*time.Second, "the status to say the datapath is broken", func() error {
			if j, d := health(node); j != api.Healthy || !strings.Contains(d, "no ENI is up") || !strings.Contains(d, "no such device") {
				return fmt.Errorf("journal %q, datapath %q", j, d)
			}
			return nil
		})
	})

	t.Run("a secondary ENI's interface is late", func(t *testing.T) {
		w := newWorld(t, "m5.large", 200)
		dp := &lateInterfaces{up: map[string]bool{}}
		node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: dp}).node
		waitReady(t, node)
		for i := range w.nodeInfo().Limits.IPv4PerENI - 1 {
			assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
		}
		eventually(t, 20*time.Second, "a usable secondary ENI in the books", func() error {
			if len(secondary(node.Snapshot())) == 0 {
				return errors.New("none yet")
			}
			return nil
		})
		if j, d := health(node); j != api.Healthy || d != api.Healthy {
			t.Fatalf("journal %q, datapath %q with the primary ENI up; want both %q", j, d, api.Healthy)
		}
	})

	t.Run("the journal broke", func(t *testing.T) {
		w := newWorld(t, "m5.large", 200)
		j := &syncFailsAtPlan{}
		node := w.startWith(fastConfig(w.dir), controller.Deps{
			WrapJournal: func(inner controller.Journal) controller.Journal { j.inner = inner; return j }}).node
		waitReady(t, node)
		if jh, _ := health(node); jh != api.Healthy {
			t.Fatalf("journal %q before it broke, want %q", jh, api.Healthy)
		}
		eventually(t, 20*time.Second, "the planned ENI's fdatasync to fail", func() error {
			if !j.broken.Load() {
				_, _ = node.Assign(context.Background(), assignReq("pod-0"))
				return errors.New("not yet")
			}
			return nil
		})
		eventually(t, 5*time.Second, "the status to say the journal is broken", func() error {
			if jh, _ := health(node); !strings.Contains(jh, "input/output error") {
				return fmt.Errorf("journal %q", jh)
			}
			return nil
		})
	})
}
