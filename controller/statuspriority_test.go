package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
)

// statusLog records the pool status lines the node logs.
type statusLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *statusLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *statusLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *statusLog) WithGroup(string) slog.Handler            { return l }
func (l *statusLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "pool status" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "status" {
			l.mu.Lock()
			l.lines = append(l.lines, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// logged returns how many times a line containing s was logged.
func (l *statusLog) logged(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestStatusNamesTheMostTellingPartAndLogsOnlyChanges: two parts have something to say at once (the untagged
// primary is closed to new IPs, and EC2 refuses every create). The status names the refused action, which
// stops the pool, above the closed primary, which the pool works around; once EC2 accepts the create again,
// the closed primary is what is left to say. Each line is logged when it comes, not at every round or read.
func TestStatusNamesTheMostTellingPartAndLogsOnlyChanges(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	w.sim.Faults().SetProbability("CreateNetworkInterface", "InvalidGroup.NotFound", 1)
	logs := &statusLog{}
	r := w.startWith(fastConfig(w.dir), controller.Deps{
		EC2:    untaggedPrimary{EC2API: w.ec2(nil), primary: w.inst.PrimaryENI},
		Logger: slog.New(logs),
	})
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the refused create in the status", func() error {
		if s := r.node.Status().PoolStatus; !strings.Contains(s, "InvalidGroup.NotFound") {
			return fmt.Errorf("pool status %q", s)
		}
		return nil
	})
	w.passVirtual(time.Minute, nil)
	if s := r.node.Status().PoolStatus; !strings.Contains(s, "InvalidGroup.NotFound") {
		t.Errorf("pool status %q: the create refusal lost its place to a less telling line", s)
	}
	w.sim.Faults().Reset()
	eventually(t, 30*time.Second, "the closed primary in the status once creates go through", func() error {
		if len(secondary(r.node.Snapshot())) == 0 {
			return fmt.Errorf("no secondary ENI yet (%s)", r.node.Status().PoolStatus)
		}
		if s := r.node.Status().PoolStatus; !strings.Contains(s, "primary ENI "+w.inst.PrimaryENI) {
			return fmt.Errorf("pool status %q", s)
		}
		return nil
	})
	// Rounds and reads that do not change the line do not log it again.
	before := logs.logged("primary ENI " + w.inst.PrimaryENI)
	w.passVirtual(30*time.Second, nil)
	for range 20 {
		r.node.Status()
	}
	if n := logs.logged("primary ENI " + w.inst.PrimaryENI); n != before {
		t.Errorf("the closed primary's line was logged %d times more while it stood", n-before)
	}
	if n := logs.logged("InvalidGroup.NotFound"); n == 0 {
		t.Errorf("the create refusal was never logged")
	}
}
