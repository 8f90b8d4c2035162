package main

import (
	"context"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/controller/api"
)

// crash makes the pool need a third ENI while EC2 throttles the commit's last step, kills the agent with
// SIGKILL once the ENI is attached but not committed, restarts it and checks its books against EC2.
func (st *story) crash(ctx context.Context) error {
	n, s := st.n, st.s
	s.heading("kill -9 in the middle of an ENI allocation, while EC2 throttles " + modifyAction)
	n.Sim.Faults().Script(modifyAction, throttleCode, 1000)
	s.say("simulator: the next 1000 %s calls fail with %s", modifyAction, throttleCode)
	flowPod := st.pods[len(st.pods)-1]
	flow, err := startFlow(ctx, st, flowPod)
	if err != nil {
		return err
	}
	defer flow.Stop()
	s.say("a TCP flow %s (%s, %s) -> VPC host is open, one exchange every 20ms", flowPod.Name, flowPod.IP, flowPod.ENI)

	s.say("adding pods until the pool needs a third ENI:")
	for {
		stat, err := n.Agent.Status(ctx)
		if err != nil {
			return err
		}
		if len(stat.ENIs) >= 3 || len(st.pods) >= maxPods {
			break
		}
		if err := st.addPods(ctx, len(st.pods)+1, ""); err != nil {
			return err
		}
	}

	var third api.ENIStatus
	var last string
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		stat, err := n.Agent.Status(wctx)
		if err != nil {
			return err
		}
		throttles := n.Sim.Counters()[modifyAction].Errors[throttleCode]
		third = api.ENIStatus{State: "planned"}
		for _, e := range stat.ENIs {
			if e.DeviceIndex == 2 || (!e.Primary && e.State != "ready") {
				third = e
			}
		}
		s.progress(&last, "waiting on EC2: ENI %s %s, modify throttled x %d", or(third.ID, "(creating)"), third.State, throttles)
		if third.State == "attached" && throttles >= 2 {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("waiting for the third ENI to be attached and its modify throttled: %w", wctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	pid := n.Agent.PID()
	if err := n.Agent.Kill(); err != nil {
		return err
	}
	s.say("kill -9 %d: ENI %s is attached, DeleteOnTermination not yet set (EC2 says %v)", pid, third.ID, st.ec2DoT(third.ID))
	if err := flow.WaitMore(ctx, 10); err != nil {
		return fmt.Errorf("with no agent running: %w", err)
	}
	s.say("no agent runs; the pinned programs and maps carry the flow on (%d exchanges so far)", flow.Count())
	if err := st.ctl(ctx, 9, "journal"); err != nil {
		return err
	}

	n.Sim.Faults().Reset()
	s.say("simulator: faults cleared")
	t0 := time.Now()
	if err := n.StartAgent(ctx, 1); err != nil {
		return fmt.Errorf("restarting the agent: %w", err)
	}
	s.say("agent restarted (pid %d), ready in %s; it resumes the commit from its journal", n.Agent.PID(), time.Since(t0).Round(time.Millisecond))
	last = ""
	for {
		stat, err := n.Agent.Status(wctx)
		if err != nil {
			return err
		}
		done := len(stat.Pending) == 0
		for _, e := range stat.ENIs {
			if e.State != "ready" || !e.DeleteOnTermination || !st.ec2DoT(e.ID) {
				done = false
			}
		}
		s.progress(&last, "waiting on EC2: ENI %s -> %s, %d pending operations", third.ID, stateOf(stat, third.ID), len(stat.Pending))
		if done {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("waiting for every ENI to be ready with DeleteOnTermination: %w", wctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	s.heading("The agent's books against EC2")
	b, err := st.books(ctx)
	if err != nil {
		return err
	}
	st.res.BooksAfter = b
	if !b.Match() {
		return errBooks
	}
	for _, r := range b.Rows {
		if !r.AgentDoT || !r.EC2DoT {
			return fmt.Errorf("%w: ENI %s has DeleteOnTermination %v in the books, %v in EC2", errBooks, r.ID, r.AgentDoT, r.EC2DoT)
		}
	}
	if err := flow.WaitMore(ctx, 10); err != nil {
		return fmt.Errorf("after the restart: %w", err)
	}
	if err := flow.Stop(); err != nil {
		return fmt.Errorf("the flow across the restart: %w", err)
	}
	st.res.FlowExchanges = flow.Count()
	s.say("the TCP flow from %s held across kill -9 and restart: %d exchanges over one connection", flowPod.Name, flow.Count())
	return nil
}

func (st *story) ec2DoT(id string) bool {
	e, ok := st.n.Sim.ENI(id)
	return ok && e.Attachment != nil && e.Attachment.DeleteOnTermination
}

func stateOf(stat *api.Status, id string) string {
	for _, e := range stat.ENIs {
		if e.ID == id {
			return e.State
		}
	}
	return "(not in the books)"
}
