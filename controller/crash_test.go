package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// churn is the workload of the crash tests: twelve pods come (the primary fills, a second ENI is created,
// attached, marked and given IPs), then go (IPs are released and the second ENI is detached and deleted).
const churnPods = 12

func churnConfig(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.WarmIPTarget = 2
	return cfg
}

// workload is what a crash test runs: pods come on an instance type, then go.
type workload struct {
	itype  string
	pods   int
	config func(dir string) controller.Config
	// fragment, when set, puts the node in a /24 whose addresses are scattered and gives a legacy node that
	// many single IPs first, so that no /28 is free.
	fragment int
	// dualStack puts the node in a subnet with an IPv6 /64 (simworld.Options.DualStack).
	dualStack bool
	// points are the kinds of crash point the workload must reach (default: every step of the ENI commit and
	// of the IPv4 assigns and unassigns).
	points []string
	// check, when set, is a promise of the workload beyond checkBooks, checked at the steady state.
	check func(w *world, st *journal.State) error
	// sets, when set, gives pods security-group sets (the world gets its groups first); checkSets then
	// holds all along.
	sets *podSets
}

// secondaryIPChurn: twelve pods on an m5.large with secondary IPs.
var secondaryIPChurn = workload{itype: "m5.large", pods: churnPods, config: churnConfig}

// setChurn: secondaryIPChurn's twelve pods on an m5.large, every other one of a security-group set: the
// set's ENI is created with its groups on demand (create, attach, modify, journaled as any), its pods take
// its addresses and the others the default pool's, then all go and the set's ENI is released. Whatever step
// a crash hits, every pod of the set is on an ENI whose groups in EC2 are exactly the set's.
var setChurn = workload{itype: "m5.large", pods: churnPods, config: churnConfig,
	sets: &podSets{policy: "db-access", byPrefix: map[string][]string{"pod-0": {groupDBClients}, "pod-2": {groupDBClients},
		"pod-4": {groupDBClients}, "pod-6": {groupDBClients}, "pod-8": {groupDBClients}, "pod-10": {groupDBClients}}}}

// prefixChurn: in prefix mode on a t3.micro (one IPv4 slot per ENI), twenty pods fill the primary's /28 and
// a second ENI is created with a prefix, attached and marked; then the pods go, the second ENI's prefix is
// unassigned and the ENI detached and deleted.
var prefixChurn = workload{itype: "t3.micro", pods: 20, config: prefixChurnConfig}

// fragmentedChurn: in prefix mode on an m5.large in a fragmented subnet, every prefix asked for is refused
// (the assign on the primary, then the create of the second ENI): the node falls back to single IPs and
// runs secondaryIPChurn's twelve pods.
var fragmentedChurn = workload{itype: "m5.large", pods: churnPods, config: prefixChurnConfig, fragment: 120}

// ipv6Churn: in IPv6 mode on an m5.large in a dual-stack subnet, the node takes one /80 on its primary ENI
// (journaled, then AssignIpv6Addresses), twelve pods take addresses of it and go. Whatever step a crash
// hits, the primary ends with exactly one /80, the one the books hold.
var ipv6Churn = workload{itype: "m5.large", pods: churnPods, config: ipv6ChurnConfig, dualStack: true,
	points: []string{"journal", "assign-ipv6"}, check: onePrefixOnThePrimary}

func ipv6ChurnConfig(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.EnableIPv6 = true
	cfg.EnablePrefixDelegation = true
	return cfg
}

// onePrefixOnThePrimary is IPv6 mode's promise: EC2 shows exactly one /80 on the primary ENI.
func onePrefixOnThePrimary(w *world, _ *journal.State) error {
	_, err := w.primaryPrefix()
	return err
}

// dualStackChurn: secondaryIPChurn in dual-stack mode: the node takes one /80 on its primary ENI besides, and
// each pod an address of it with its IPv4, in the same record. Whatever step a crash hits, no pod loses
// either address or shares one, and the primary ends with exactly one /80.
var dualStackChurn = workload{itype: "m5.large", pods: churnPods, config: dualStackChurnConfig, dualStack: true,
	points: []string{"journal", "create", "attach", "modify", "assign-ips", "unassign-ips", "detach", "delete", "assign-ipv6"},
	check:  onePrefixOnThePrimary}

func dualStackChurnConfig(dir string) controller.Config {
	cfg := churnConfig(dir)
	cfg.DualStack = true
	return cfg
}

func prefixChurnConfig(dir string) controller.Config {
	cfg := churnConfig(dir)
	cfg.EnablePrefixDelegation = true
	return cfg
}

// runChurn runs the workload with a crash at point at (0: none), restarting from the journal after the
// crash, and returns the crash points it saw. It fails the test if any promise breaks.
func runChurn(t *testing.T, wl workload, at int64) []string {
	var w *world
	switch {
	case wl.fragment > 0:
		w = newWorldIn(t, wl.itype, 500, ec2sim.SubnetSpec{ID: "subnet-1", VPCID: "vpc-1", CIDR: "10.0.64.0/24", AZ: "us-west-2a", Scatter: true})
		w.fragmentSubnet(wl.fragment)
	case wl.dualStack:
		w = newWorldWith(t, simworld.Options{Type: wl.itype, Factor: 500, DualStack: true})
	default:
		w = newWorld(t, wl.itype, 500)
	}
	c := &crash{at: at}
	api0 := w.ec2(nil)
	churnConfig := wl.config
	var groups controller.PodSecurityGroups
	if wl.sets != nil {
		w.withSetGroups()
		groups = &podSets{policy: wl.sets.policy, byPrefix: wl.sets.byPrefix}
	}
	r := w.startWith(churnConfig(w.dir), controller.Deps{EC2: crashEC2{EC2API: api0, c: c}, PodSecurityGroups: groups,
		WrapJournal: func(j controller.Journal) controller.Journal { return crashJournal{inner: j, c: c} }})
	restarted := false
	answered := map[string]string{}
	releasing := ""
	restart := func() {
		if restarted || !c.dead.Load() {
			return
		}
		restarted = true
		r.stop()
		r = w.startWith(churnConfig(w.dir), controller.Deps{PodSecurityGroups: groups})
		waitReady(t, r.node)
		st := r.node.Snapshot()
		for cid, ip := range answered {
			if cid == releasing {
				continue // the release may have reached the journal before the crash: CNI DEL is retried
			}
			if a := st.Assignment(cid, "eth0"); a == nil || dualAddrs(a.IP, a.IPv6) != ip {
				t.Fatalf("crash at %d (%s): assignment of %s (%s) lost on restart", at, c.points[len(c.points)-1], cid, ip)
			}
		}
	}
	eventually(t, 20*time.Second, "first controller ready", func() error {
		if c.dead.Load() {
			return nil
		}
		if ok, why := r.node.Ready(); !ok {
			return fmt.Errorf("%s", why)
		}
		return nil
	})
	restart()
	step := func(what string, f func(n *controller.Node) error) {
		eventually(t, 30*time.Second, what, func() error {
			err := f(r.node)
			if err != nil && c.dead.Load() {
				restart()
			}
			return err
		})
	}
	for i := range wl.pods {
		cid := fmt.Sprintf("pod-%d", i)
		step("assigning "+cid, func(n *controller.Node) error {
			a, err := n.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"},
				Pod: api.PodIdentity{Namespace: "default", Name: cid}})
			if err != nil {
				return err
			}
			if wl.sets != nil {
				if err := w.onItsSetsENI(n.Snapshot(), wl.sets, cid, a); err != nil {
					t.Fatalf("crash at %d: %v", at, err)
				}
			}
			got := dualAddrs(a.IP, a.IPv6)
			for other, addrs := range answered {
				for _, ip := range strings.Fields(got) {
					if other != cid && slices.Contains(strings.Fields(addrs), ip) {
						t.Fatalf("IP %s given to %s and %s", ip, other, cid)
					}
				}
			}
			if prev, ok := answered[cid]; ok && prev != got {
				t.Fatalf("repeated assign of %s answered %s, then %s", cid, prev, got)
			}
			answered[cid] = got
			return nil
		})
	}
	for i := range wl.pods {
		cid := fmt.Sprintf("pod-%d", i)
		releasing = cid
		step("releasing "+cid, func(n *controller.Node) error {
			_, err := n.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}})
			if err == nil {
				delete(answered, cid)
			}
			return err
		})
	}
	// A crash in the background work (IP release, ENI release) comes after the last API call.
	eventually(t, 60*time.Second, fmt.Sprintf("steady state after crash at %d", at), func() error {
		if c.dead.Load() {
			restart()
		}
		for _, e := range w.sim.Snapshot().ENIs {
			if e.Tags["eniwire.io/instance-id"] == w.inst.ID {
				st := r.node.Snapshot()
				return fmt.Errorf("ENI %s still exists (%s); books %+v ipops %+v assignments %d cooldowns %+v status %q", e.ID, e.Status, st.ENIs, st.IPOps, len(st.Assignments), st.Cooldowns, r.node.Status().PoolStatus)
			}
		}
		st := r.node.Snapshot()
		if err := w.checkBooks(st, answered); err != nil {
			return err
		}
		if wl.check != nil {
			return wl.check(w, st)
		}
		return nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.points...)
}

func TestCrashAtEveryStepLosesNothing(t *testing.T) {
	crashEveryStep(t, secondaryIPChurn)
}

func TestCrashAtEveryStepOfASecurityGroupSetLosesNothing(t *testing.T) {
	crashEveryStep(t, setChurn)
}

func TestCrashAtEveryStepOfPrefixModeLosesNothing(t *testing.T) {
	crashEveryStep(t, prefixChurn)
}

func TestCrashAtEveryStepOfTheSingleIPFallbackLosesNothing(t *testing.T) {
	crashEveryStep(t, fragmentedChurn)
}

func TestCrashAtEveryStepOfIPv6ModeLosesNothing(t *testing.T) {
	crashEveryStep(t, ipv6Churn)
}

func TestCrashAtEveryStepOfDualStackModeLosesNothing(t *testing.T) {
	crashEveryStep(t, dualStackChurn)
}

// crashEveryStep runs the workload once to list its crash points, then once per point with a crash there.
func crashEveryStep(t *testing.T, wl workload) {
	points := runChurn(t, wl, 0)
	kinds := map[string]int{}
	for _, p := range points {
		kinds[p]++
	}
	want := wl.points
	if want == nil {
		want = []string{"journal", "create", "attach", "modify", "assign-ips", "unassign-ips", "detach", "delete"}
	}
	for _, want := range want {
		if kinds[want] == 0 {
			t.Fatalf("the workload never reached %q: %v", want, kinds)
		}
	}
	t.Logf("workload: %d crash points %v", len(points), kinds)
	for at := int64(1); at <= int64(len(points)); at++ {
		t.Run(fmt.Sprintf("crash after point %d (%s)", at, points[at-1]), func(t *testing.T) {
			t.Parallel()
			got := runChurn(t, wl, at)
			if len(got) < int(at) {
				t.Logf("crash point %d not reached this run (%d points): %s", at, len(got), strings.Join(got, ","))
			}
		})
	}
}
