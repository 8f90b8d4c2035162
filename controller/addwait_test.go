package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
)

// The growth calls the tests hold back with the simulator's latency, so that ADDs wait for them.
var growthCalls = []string{"AssignPrivateIpAddresses", "CreateNetworkInterface"}

func slowGrowth(w *world, d time.Duration) {
	for _, a := range growthCalls {
		w.sim.Faults().SetLatency(a, d)
	}
}

// addAnswer is one ADD's answer.
type addAnswer struct {
	a   *api.Assignment
	err error
}

// addAsync sends an ADD for cid and returns where its answer comes.
func addAsync(n *controller.Node, cid string) <-chan addAnswer {
	out := make(chan addAnswer, 1)
	go func() {
		a, err := n.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"},
			Netns: testNetnsDir + cid})
		out <- addAnswer{a, err}
	}()
	return out
}

// waitAddsWaiting waits until k ADDs wait in line.
func waitAddsWaiting(t *testing.T, n *controller.Node, k int) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("%d ADDs waiting", k), func() error {
		if got := n.Status().AddsWaiting; got != k {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

// drainedNode starts an m5.large node with WARM_IP_TARGET warm and ENIWIRE_ADD_WAIT wait, waits for its warm
// pool, holds every later growth back by growth (slowGrowth), and takes the warm pool (drainFree). The growth
// is held before the pool is taken, so the refill that taking it starts cannot land at once.
func drainedNode(t *testing.T, warm int, wait, growth time.Duration) (*world, *running, []string) {
	t.Helper()
	w := newWorld(t, "m5.large", 50)
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget, cfg.AddWait = warm, wait
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the warm pool", func() error {
		if s := r.node.Status(); s.Warm == 0 || len(s.Pending) > 0 {
			return fmt.Errorf("%d warm, %d pending", s.Warm, len(s.Pending))
		}
		return nil
	})
	slowGrowth(w, growth)
	return w, r, drainFree(t, r.node, "early")
}

// drainFree assigns pods until the node has no free IP, and returns their ids.
func drainFree(t *testing.T, n *controller.Node, prefix string) []string {
	t.Helper()
	var ids []string
	for i := 0; n.Status().Warm > 0; i++ {
		cid := fmt.Sprintf("%s-%d", prefix, i)
		assignRetrying(t, n, cid)
		ids = append(ids, cid)
	}
	return ids
}

func notAnswered(t *testing.T, what string, ch <-chan addAnswer) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("%s was answered (%+v, %v) while it should still wait", what, got.a, got.err)
	default:
	}
}

func answer(t *testing.T, what string, ch <-chan addAnswer) addAnswer {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-time.After(30 * time.Second):
		t.Fatalf("%s got no answer", what)
	}
	return addAnswer{}
}

// TestAnADDWaitsOutARefillAndGetsTheIPsThatLand: the pool is empty and its growth takes 20 virtual seconds;
// the ADDs that come meanwhile wait for it and get IPs, instead of "no IP" for kubelet to retry.
func TestAnADDWaitsOutARefillAndGetsTheIPsThatLand(t *testing.T) {
	w, r, _ := drainedNode(t, 1, time.Minute, 15*time.Second)
	start := w.clk.Now()
	var adds []<-chan addAnswer
	for i := range 3 {
		adds = append(adds, addAsync(r.node, fmt.Sprintf("pod-%d", i)))
	}
	for i, ch := range adds {
		got := answer(t, fmt.Sprintf("ADD %d", i), ch)
		if got.err != nil {
			t.Fatalf("ADD %d: %v (waited %s of virtual time)", i, got.err, w.clk.Since(start).Round(time.Second))
		}
	}
	if took := w.clk.Since(start); took < 10*time.Second {
		t.Fatalf("the ADDs were answered after %s, before the growth could land", took)
	}
}

// TestTheWaitingADDsAreServedFirstComeFirstServed: three ADDs wait in line while growth is held (EC2 answers
// after the calls' deadline, so they fail and are retried); the first IP
// that frees goes to the first of them, the next to the second, even to the disadvantage of a newcomer.
func TestTheWaitingADDsAreServedFirstComeFirstServed(t *testing.T) {
	w, r, pods := drainedNode(t, 2, 10*time.Minute, 2*time.Minute)
	if len(pods) < 2 {
		t.Fatalf("only %d pods took the warm pool", len(pods))
	}
	var line []<-chan addAnswer
	for i := range 3 {
		line = append(line, addAsync(r.node, fmt.Sprintf("waiter-%d", i)))
		waitAddsWaiting(t, r.node, i+1)
	}
	freed := func(cid string) string {
		t.Helper()
		out, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}, Unused: true})
		if err != nil || !out.Released {
			t.Fatalf("releasing %s: %+v, %v", cid, out, err)
		}
		return out.Assignment.IP
	}
	ip := freed(pods[0])
	if got := answer(t, "the first waiter", line[0]); got.err != nil || got.a.IP != ip {
		t.Fatalf("the first waiter got %+v, %v; want the freed %s", got.a, got.err, ip)
	}
	newcomer := addAsync(r.node, "newcomer")
	waitAddsWaiting(t, r.node, 3)
	notAnswered(t, "the second waiter", line[1])
	ip = freed(pods[1])
	if got := answer(t, "the second waiter", line[1]); got.err != nil || got.a.IP != ip {
		t.Fatalf("the second waiter got %+v, %v; want the freed %s", got.a, got.err, ip)
	}
	notAnswered(t, "the third waiter", line[2])
	notAnswered(t, "the newcomer", newcomer)
	// Once growth lands, the rest get theirs.
	w.sim.Faults().Reset()
	for i, ch := range []<-chan addAnswer{line[2], newcomer} {
		if got := answer(t, fmt.Sprint("waiter after the growth ", i), ch); got.err != nil {
			t.Fatal(got.err)
		}
	}
}

// TestADELEndsTheWaitOfItsADD: the runtime gives up on a sandbox whose ADD waits (EC2 answers after the
// calls' deadline) and sends its DEL: the ADD ends at once, superseded, and when the IPs land the container
// holds none.
func TestADELEndsTheWaitOfItsADD(t *testing.T) {
	w, r, _ := drainedNode(t, 1, 10*time.Minute, time.Minute)
	add := addAsync(r.node, "given-up")
	waitAddsWaiting(t, r.node, 1)
	del, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "given-up", IfName: "eth0"}})
	if err != nil || del.Released {
		t.Fatalf("the DEL: %+v, %v; want success with nothing released", del, err)
	}
	got := answer(t, "the waiting ADD", add)
	if got.err == nil || !strings.Contains(got.err.Error(), "a DEL of the container came") {
		t.Fatalf("the ADD got %+v, %v; want it superseded by the DEL", got.a, got.err)
	}
	if n := r.node.Status().AddsWaiting; n != 0 {
		t.Fatalf("%d ADDs still waiting", n)
	}
	w.sim.Faults().Reset()
	assignRetrying(t, r.node, "after")
	if _, err := r.node.Check(context.Background(), api.CheckRequest{Attachment: api.Attachment{ContainerID: "given-up", IfName: "eth0"}}); !errors.Is(err, controller.ErrNotFound) {
		t.Fatalf("the container whose ADD was superseded holds an IP: %v", err)
	}
}

// TestADELdADDIsNoDemand: ADDs that wait for an IP are demand the pool grows for; once their DELs end the wait,
// nobody will retry them, and they stop counting at once (issue 36 item 19: five cancelled ADDs counted as
// demand for 10 s, and the pool grew 5 IPs for pods that were gone).
func TestADELdADDIsNoDemand(t *testing.T) {
	_, r, _ := drainedNode(t, 1, 10*time.Minute, time.Hour)
	const waiting = 5
	adds := make([]<-chan addAnswer, waiting)
	for i := range adds {
		adds[i] = addAsync(r.node, fmt.Sprintf("gone-%d", i))
	}
	waitAddsWaiting(t, r.node, waiting)
	if got := r.node.PodsWaitingForIP(); got != waiting {
		t.Fatalf("%d pods waiting for an IP, want the %d ADDs in line", got, waiting)
	}
	for i, add := range adds {
		cid := fmt.Sprintf("gone-%d", i)
		if _, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}}); err != nil {
			t.Fatal(err)
		}
		if got := answer(t, cid, add); got.err == nil || !strings.Contains(got.err.Error(), "a DEL of the container came") {
			t.Fatalf("%s got %+v, %v; want it superseded by its DEL", cid, got.a, got.err)
		}
		if got, want := r.node.PodsWaitingForIP(), waiting-1-i; got != want {
			t.Fatalf("after %d DELs the pool grows for %d pods, want the %d still waiting", i+1, got, want)
		}
	}
}

// TestAnADDWaitsNoLongerThanTheSetting: growth is held (EC2 answers after the calls' deadline); an ADD with ENIWIRE_ADD_WAIT 10s is
// answered "no IP" after 10 s, naming the setting.
func TestAnADDWaitsNoLongerThanTheSetting(t *testing.T) {
	w, r, _ := drainedNode(t, 1, 10*time.Second, time.Minute)
	start := w.clk.Now()
	got := answer(t, "the ADD", addAsync(r.node, "late"))
	took := w.clk.Since(start)
	if !errors.Is(got.err, controller.ErrNoIP) || !strings.Contains(got.err.Error(), "none came within ENIWIRE_ADD_WAIT (10s)") {
		t.Fatalf("the ADD got %+v, %v; want no IP within ENIWIRE_ADD_WAIT", got.a, got.err)
	}
	if took < 10*time.Second || took > 30*time.Second {
		t.Fatalf("the ADD was answered after %s of virtual time, want 10 s", took.Round(time.Second))
	}
}

// TestAnADDTheNodeCannotServeFailsAtOnceNamingTheCause: when no IP can come soon, the ADD does not wait: its
// error says why and what fixes it.
func TestAnADDTheNodeCannotServeFailsAtOnceNamingTheCause(t *testing.T) {
	cases := []struct {
		name  string
		itype string
		cfg   func(*controller.Config)
		// before runs on the started node's world, before the pool is drained; after, once it is.
		before, after func(*world)
		wants         []string
		maxPods       bool
	}{
		{name: "max pods reached", itype: "m5.large", cfg: func(c *controller.Config) { c.MaxPods = 3 },
			wants: []string{"max pods reached (3/3 pods assigned)", "raise MAX_PODS"}, maxPods: true},
		{name: "the ENIs and their IPs at the instance's limit", itype: "t3.micro",
			wants: []string{"at the ENI limit", "a larger instance type, ENABLE_PREFIX_DELEGATION, or MAX_ENI"}},
		{name: "the subnet exhausted", itype: "m5.large", cfg: func(c *controller.Config) { c.WarmIPTarget = 1 },
			after: func(w *world) {
				if _, err := w.sim.ExhaustSubnet("subnet-1", 0); err != nil {
					w.t.Fatal(err)
				}
			},
			wants: []string{"subnet subnet-1 has no free addresses", "kubernetes.io/role/cni=1"}},
		{name: "IAM denies the growth", itype: "m5.large", cfg: func(c *controller.Config) { c.WarmIPTarget = 1 },
			after: func(w *world) {
				for _, a := range growthCalls {
					w.sim.Faults().SetProbability(a, "UnauthorizedOperation", 1)
				}
			},
			wants: []string{"UnauthorizedOperation", "check the node's IAM policy"}},
		{name: "EC2 refusing the growth", itype: "m5.large", cfg: func(c *controller.Config) { c.WarmIPTarget = 1 },
			after: func(w *world) {
				for _, a := range growthCalls {
					w.sim.Faults().SetProbability(a, "InvalidParameterValue", 1)
				}
			},
			wants: []string{"EC2 refuses", "InvalidParameterValue"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.itype, 50)
			cfg := fastConfig(w.dir)
			cfg.AddWait = 10 * time.Minute
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			r := w.start(cfg, nil, nil)
			waitReady(t, r.node)
			if c.after != nil {
				c.after(w)
			}
			// Until the node learns it cannot grow, an ADD waits for the growth it starts: the first ADDs may
			// wait a round, and are answered once it fails.
			var err error
			for i := 0; ; i++ {
				start := w.clk.Now()
				_, err = r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: fmt.Sprint("pod-", i), IfName: "eth0"},
					Netns: testNetnsDir + fmt.Sprint("pod-", i)})
				if err == nil {
					continue
				}
				if took := w.clk.Since(start); took > 5*time.Minute {
					t.Fatalf("ADD %d waited %s of virtual time for an IP the node could not get", i, took.Round(time.Second))
				}
				break
			}
			// The next ADD, with the cause known, is answered at once.
			start := w.clk.Now()
			_, err = r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "one-more", IfName: "eth0"},
				Netns: testNetnsDir + "one-more"})
			if took := w.clk.Since(start); took > 3*time.Second {
				t.Errorf("the ADD waited %s of virtual time; want an answer at once", took.Round(time.Second))
			}
			want := controller.ErrNoIP
			if c.maxPods {
				want = controller.ErrMaxPods
			}
			if !errors.Is(err, want) {
				t.Fatalf("got %v, want %v", err, want)
			}
			for _, s := range c.wants {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestABurstOnAnEmptyPrefixNodeGetsItsIPsInFewGrowthRounds: 100 ADDs come together on a prefix-mode node with
// the default settings (WARM_PREFIX_TARGET 1): the pool sizes its growth by the ADDs waiting, so a handful of
// AssignPrivateIpAddresses calls bring their prefixes, not one per /28, and every ADD succeeds.
func TestABurstOnAnEmptyPrefixNodeGetsItsIPsInFewGrowthRounds(t *testing.T) {
	w := newWorld(t, "m5.large", 50)
	cfg := prefixConfig(w.dir)
	// The ADDs wait as long as the growth takes: at 50 x, the default 10 s are 200 ms of a machine that may be
	// busy, and what is measured is the calls, not the wait.
	cfg.AddWait = 10 * time.Minute
	r := w.start(cfg, nil, nil)
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the warm prefix", func() error {
		if s := r.node.Status(); s.Warm < 16 || len(s.Pending) > 0 {
			return fmt.Errorf("%d warm, %d pending", s.Warm, len(s.Pending))
		}
		return nil
	})
	before := w.sim.Counters()
	start := w.clk.Now()
	const burst = 100
	var wg sync.WaitGroup
	errs := make([]error, burst)
	for i := range burst {
		wg.Go(func() {
			_, errs[i] = r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: fmt.Sprint("burst-", i), IfName: "eth0"},
				Netns: testNetnsDir + fmt.Sprint("burst-", i)})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("ADDs of the burst failed: %v", err)
	}
	after := w.sim.Counters()
	calls := func(a string) int64 { return after[a].Calls - before[a].Calls }
	assigns, creates := calls("AssignPrivateIpAddresses"), calls("CreateNetworkInterface")
	t.Logf("%d ADDs served in %s of virtual time with %d AssignPrivateIpAddresses and %d CreateNetworkInterface calls",
		burst, w.clk.Since(start).Round(time.Second), assigns, creates)
	// 100 pods need 6 more /28s: the primary ENI has the slots, so one call would do; allow a second for the
	// ADDs that came after the first call had gone.
	if assigns > 3 || creates > 0 {
		t.Fatalf("%d assigns and %d creates for a burst of %d; want its prefixes in few calls", assigns, creates, burst)
	}
}

// TestAnADDBeforeTheNodeIsReadyWaitsForIt: pods scheduled before the agent has heard from EC2 (the first
// reconcile takes 5 virtual seconds) get their IPs once the pool has them, instead of "not ready" for kubelet
// to retry.
func TestAnADDBeforeTheNodeIsReadyWaitsForIt(t *testing.T) {
	w := newWorld(t, "m5.large", 50)
	w.sim.Faults().SetLatency("DescribeNetworkInterfaces", 5*time.Second)
	cfg := fastConfig(w.dir)
	cfg.AddWait = time.Minute
	r := w.start(cfg, nil, nil)
	if ok, _ := r.node.Ready(); ok {
		t.Fatal("the node is ready before its first reconcile could end")
	}
	var adds []<-chan addAnswer
	for i := range 3 {
		adds = append(adds, addAsync(r.node, fmt.Sprint("early-", i)))
	}
	for i, ch := range adds {
		if got := answer(t, fmt.Sprint("ADD ", i), ch); got.err != nil {
			t.Fatalf("ADD %d before the node was ready: %v", i, got.err)
		}
	}
}
