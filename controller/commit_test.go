package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
)

// secondary returns the books' non-primary usable ENIs.
func secondary(st *journal.State) []journal.ENI {
	var out []journal.ENI
	for _, e := range st.ENIs {
		if !e.Primary && e.Usable() {
			out = append(out, e)
		}
	}
	return out
}

func TestThrottledModifyKeepsTheENIInTheBooksAndInUse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		throttle func(w *world)
		until    func(w *world) // ends the throttling
	}{
		{"throttled once", func(w *world) { w.sim.Faults().Script("ModifyNetworkInterfaceAttribute", "RequestLimitExceeded", 1) }, nil},
		{"throttled forty times", func(w *world) { w.sim.Faults().Script("ModifyNetworkInterfaceAttribute", "RequestLimitExceeded", 40) }, nil},
		{"throttled for five virtual minutes",
			func(w *world) {
				w.sim.Faults().SetProbability("ModifyNetworkInterfaceAttribute", "RequestLimitExceeded", 1)
			},
			func(w *world) {
				w.sim.Faults().SetProbability("ModifyNetworkInterfaceAttribute", "RequestLimitExceeded", 0)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "m5.large", 200)
			tc.throttle(w)
			r := w.start(fastConfig(w.dir), nil, nil)
			waitReady(t, r.node)
			// Fill the primary so that the warm target needs a second ENI, then take IPs from that ENI.
			answered := map[string]string{}
			for i := range 12 {
				a := assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
				answered[a.ContainerID] = a.IP
			}
			st := r.node.Snapshot()
			sec := secondary(st)
			if len(sec) == 0 {
				t.Fatal("no secondary ENI in the books")
			}
			// Growth that counts the pods waiting may bring two secondaries at once: pods on either count.
			onSecondary := 0
			for _, a := range st.Assignments {
				for _, e := range sec {
					if a.ENI == e.ID {
						onSecondary++
					}
				}
			}
			if onSecondary == 0 {
				t.Fatalf("no pod got an IP of a secondary ENI (%+v)", sec)
			}
			if tc.until != nil {
				start := w.clk.Now()
				eventually(t, 30*time.Second, "five virtual minutes", func() error {
					if s := secondary(r.node.Snapshot()); len(s) == 0 || s[0].DeleteOnTermination {
						t.Fatalf("ENI left the books or got DeleteOnTermination while Modify is throttled: %+v", s)
					}
					if w.clk.Since(start) < 5*time.Minute {
						return fmt.Errorf("only %s passed", w.clk.Since(start))
					}
					return nil
				})
				tc.until(w)
			}
			eventually(t, 30*time.Second, "DeleteOnTermination holds", func() error {
				e, ok := w.sim.ENI(sec[0].ID)
				if !ok || e.Attachment == nil || !e.Attachment.DeleteOnTermination {
					return fmt.Errorf("ENI %s: %+v", sec[0].ID, e.Attachment)
				}
				return w.checkBooks(r.node.Snapshot(), answered)
			})
			c := w.sim.Counters()
			if n := c["AttachNetworkInterface"].Errors["AttachmentLimitExceeded"]; n != 0 {
				t.Fatalf("simulator sent %d AttachmentLimitExceeded", n)
			}
			if c["ModifyNetworkInterfaceAttribute"].Throttled+int64(len(c["ModifyNetworkInterfaceAttribute"].Errors)) == 0 {
				t.Fatal("the simulator never throttled Modify: the test tested nothing")
			}
		})
	}
}

func TestNewENICostsThreeMutatingCalls(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	cfg := fastConfig(w.dir)
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	// One pod leaves the primary short of a whole free ENI: WARM_ENI_TARGET=1 asks for a second ENI.
	assignRetrying(t, r.node, "pod-0")
	eventually(t, 20*time.Second, "a ready secondary ENI", func() error {
		for _, e := range r.node.Snapshot().ENIs {
			if !e.Primary && e.State == journal.Ready {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	c := w.sim.Counters()
	for _, action := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute"} {
		if c[action].Calls != 1 {
			t.Errorf("%s called %d times, want 1", action, c[action].Calls)
		}
	}
	if c["CreateTags"].Calls != 0 {
		t.Errorf("CreateTags called %d times, want 0 (tags go in TagSpecifications)", c["CreateTags"].Calls)
	}
}

func TestReleasedPodsLetTheSurplusENIGo(t *testing.T) {
	w := newWorld(t, "m5.large", 500)
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget = 2
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	for i := range 12 {
		assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
	}
	for i := range 12 {
		if _, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: fmt.Sprintf("pod-%d", i), IfName: "eth0"}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "secondary ENI released and deleted", func() error {
		for _, e := range w.sim.Snapshot().ENIs {
			if e.Tags["eniwire.io/instance-id"] == w.inst.ID {
				return fmt.Errorf("ENI %s still exists (%s)", e.ID, e.Status)
			}
		}
		return w.checkBooks(r.node.Snapshot(), nil)
	})
}
