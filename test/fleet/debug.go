package fleet

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// debugLeak prints to stderr what is known of a leaked ENI (its owner, whether the owner runs, the owner's
// record of its operation) when FLEET_DEBUG_LEAKS is set: the first thing to read when a run reports leaks.
func (f *fleet) debugLeak(e ec2sim.ENIState) {
	if os.Getenv("FLEET_DEBUG_LEAKS") == "" {
		return
	}
	owner := e.Tags["eniwire.io/instance-id"]
	op := e.Tags["eniwire.io/op-id"]
	live, state := false, "-"
	f.mu.Lock()
	for _, s := range f.slots {
		if s.inst.ID == owner {
			live = s.live
			if en, ok := s.m.(*eniwireNode); ok && live {
				for _, r := range en.ctl().Snapshot().ENIs {
					if r.OpID == op {
						state = fmt.Sprintf("%s id=%s err=%s", r.State, r.ID, r.LastError)
					}
				}
			}
		}
	}
	f.mu.Unlock()
	fmt.Fprintf(os.Stderr, "LEAK %s status=%s att=%+v owner=%s live=%v created=%s now=%s op=%s books=%s\n", e.ID, e.Status, e.Attachment,
		owner, live, e.Tags["eniwire.io/created-at"], f.w.clk.Now().UTC().Format("15:04:05"), op, state)
}

// startTrace prints to stderr, every 3 s of virtual time, the successful and throttled calls of the ENI actions
// in that interval and the settled nodes, and for the last few unsettled nodes their ENI states and local rates,
// when FLEET_TRACE is set: it shows which account bucket is saturated and which sits idle (an idle attach bucket
// while creates saturate theirs, or a describe bucket starved by housekeeping) and what the tail waits on.
func (f *fleet) startTrace(ctx context.Context) {
	if os.Getenv("FLEET_TRACE") == "" {
		return
	}
	go func() {
		prev := map[string][2]int64{}
		for sleepCtx(ctx, f.w.clk, 3*time.Second) {
			line := fmt.Sprintf("TRACE t=%4.0f", f.now().Seconds())
			for _, a := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute", "DescribeNetworkInterfaces"} {
				c := f.w.sim.Counters()[a]
				var errs int64
				for _, n := range c.Errors {
					errs += n
				}
				ok := c.Calls - errs
				p := prev[a]
				line += fmt.Sprintf(" %s ok+%d thr+%d", a[:6], ok-p[0], c.Throttled-p[1])
				prev[a] = [2]int64{ok, c.Throttled}
			}
			ever, now, live := f.markSettled()
			line += fmt.Sprintf(" settled %d/%d (%d)", now, live, ever)
			fmt.Fprintln(os.Stderr, line)
			if live-now <= 8 {
				for _, s := range f.liveSlots() {
					en, ok := s.m.(*eniwireNode)
					if !ok || s.m.settled() {
						continue
					}
					st := ""
					for _, e := range en.ctl().Snapshot().ENIs {
						if !e.Primary {
							st += string(e.State)[:3] + " "
						}
					}
					en.mu.Lock()
					api := en.api
					en.mu.Unlock()
					fmt.Fprintf(os.Stderr, "   %s %s [%s] rates c=%.3f a=%.3f m=%.3f\n", s.inst.ID, s.inst.Type, st,
						api.Rate("CreateNetworkInterface"), api.Rate("AttachNetworkInterface"), api.Rate("ModifyNetworkInterfaceAttribute"))
				}
			}
		}
	}()
}
