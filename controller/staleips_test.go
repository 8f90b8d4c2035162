package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
)

// booksIPs returns every secondary IP the books hold, by ENI.
func booksIPs(st *journal.State) map[string]string {
	out := map[string]string{}
	for _, e := range st.ENIs {
		for _, ip := range e.IPs {
			out[ip] = e.ID
		}
	}
	return out
}

// freeIPOf returns an IP of the books' ENI eniID that no pod holds.
func freeIPOf(st *journal.State, eniID string) string {
	for _, e := range st.ENIs {
		if e.ID != eniID {
			continue
		}
		for _, ip := range e.IPs {
			if !slices.ContainsFunc(st.Assignments, func(a journal.Assignment) bool { return a.IP == ip }) {
				return ip
			}
		}
	}
	return ""
}

func primaryID(st *journal.State) string {
	for _, e := range st.ENIs {
		if e.Primary {
			return e.ID
		}
	}
	return ""
}

// TestIPsUnassignedOutsideEniwireLeaveTheBooks: someone unassigns IPs from our ENIs behind our back. A free
// one leaves the books (a pod must never get an address its ENI does not hold: EC2 may have given it to
// another node); one a pod holds stays with its pod, reported.
func TestIPsUnassignedOutsideEniwireLeaveTheBooks(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	held := assignRetrying(t, r.node, "pod-0")
	st := r.node.Snapshot()
	prim := primaryID(st)
	free := freeIPOf(st, prim)
	if free == "" || held.ENI != prim {
		t.Fatalf("want a pod and a free IP on the primary %s; pod on %s, free %q", prim, held.ENI, free)
	}
	outsider := w.ec2(nil)
	if _, err := outsider.UnassignPrivateIpAddresses(context.Background(), &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(prim), PrivateIpAddresses: []string{free, held.IP}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the free IP EC2 no longer lists leaves the books", func() error {
		if eni, ok := booksIPs(r.node.Snapshot())[free]; ok {
			return fmt.Errorf("%s still in the books on %s", free, eni)
		}
		return nil
	})
	st = r.node.Snapshot()
	if a := st.Assignment("pod-0", "eth0"); a == nil || a.IP != held.IP {
		t.Fatalf("the assignment of a pod whose IP EC2 took away changed: %+v", a)
	}
	for i := range 8 {
		a := assignRetrying(t, r.node, fmt.Sprintf("later-%d", i))
		if a.IP == free || a.IP == held.IP {
			t.Fatalf("pod later-%d got %s, which its ENI no longer holds", i, a.IP)
		}
	}
}

// TestOurOwnUnassignsAreNotResurrectedByALaggingDescribe: right after our UnassignPrivateIpAddresses a
// Describe may still list the IPs. The reconcile must not take them back as free IPs.
func TestOurOwnUnassignsAreNotResurrectedByALaggingDescribe(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	lag := 90 * time.Second
	r, unassigned := w.giveSurplusBackWithLag(t, lag)
	w.passVirtual(2*lag, func() { w.noneBack(t, r.node, unassigned) })
}

// TestARestartWithinTheDescribeLagDoesNotResurrectOurUnassigns: the node gives surplus IPs back and is
// restarted at once, while EC2's Describe still lists them on their ENI. The new process has no memory of
// the unassign but what the journal holds: those IPs must not come back into the pool on that stale listing,
// nor be handed to a pod (EC2 may have given them to another node already).
func TestARestartWithinTheDescribeLagDoesNotResurrectOurUnassigns(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	lag := 90 * time.Second
	r, unassigned := w.giveSurplusBackWithLag(t, lag)
	r.stop()
	w.restartKeepsOut(t, unassigned, lag)
}

// surplusConfig keeps two warm IPs, so that released pods leave a surplus to give back.
func surplusConfig(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.WarmIPTarget = 2
	return cfg
}

// giveSurplusBackWithLag starts a node (surplusConfig) while EC2's Describe lists unassigned IPs for lag,
// assigns six pods and releases them, so that the node gives the surplus IPs back, and returns the node and
// the IPs the books held that EC2 no longer holds on their ENI (by IP) once there are some.
func (w *world) giveSurplusBackWithLag(t *testing.T, lag time.Duration) (*running, map[string]string) {
	t.Helper()
	w.sim.Faults().SetUnassignLag(lag)
	r := w.start(surplusConfig(w.dir), nil, nil)
	node := r.node
	waitReady(t, node)
	for i := range 6 {
		assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
	}
	for i := range 6 {
		if _, err := node.Release(context.Background(), api0Release(fmt.Sprintf("pod-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	held := map[string]string{}
	unassigned := map[string]string{}
	eventually(t, 30*time.Second, "the surplus given back", func() error {
		for ip, eni := range booksIPs(node.Snapshot()) {
			held[ip] = eni
		}
		inEC2 := w.ec2IPs()
		for ip, eni := range held {
			if inEC2[ip] != eni {
				unassigned[ip] = eni
			}
		}
		if len(unassigned) == 0 {
			return fmt.Errorf("no unassign yet")
		}
		return nil
	})
	return r, unassigned
}

// ec2IPs returns the secondary IPs EC2 holds on each ENI, by IP.
func (w *world) ec2IPs() map[string]string {
	out := map[string]string{}
	for _, e := range w.sim.Snapshot().ENIs {
		for _, ip := range e.IPs {
			out[ip] = e.ID
		}
	}
	return out
}

// noneBack fails t when an IP of unassigned is a free IP of the books while EC2 does not hold it on its ENI,
// before and after the books are read (an unassign takes an IP out of the books only after its call).
func (w *world) noneBack(t *testing.T, node *controller.Node, unassigned map[string]string) {
	t.Helper()
	before := w.ec2IPs()
	st := node.Snapshot()
	after := w.ec2IPs()
	for ip, eni := range booksIPs(st) {
		leaving := slices.ContainsFunc(st.IPOps, func(op journal.IPOp) bool { return slices.Contains(op.IPs, ip) })
		if unassigned[ip] == eni && !leaving && before[ip] != eni && after[ip] != eni {
			t.Fatalf("IP %s, unassigned by the node from %s, is back in the books after a lagging Describe", ip, eni)
		}
	}
}

func api0Release(cid string) api.ReleaseRequest {
	return api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}}
}

// TestAnUnassignResumedWithinTheDescribeLagKeepsItsIPsOutOfThePool: the node dies right after EC2 applied
// its unassign, before the journal heard of it; the restarted node resumes the journaled op while EC2's
// Describe still lists the addresses. EC2 refuses the resent call (the addresses are no longer assigned), and
// the lagging listing shows them all: that must not read as "EC2 took none of them" and give them back to
// the pool (EC2 may have handed them to another node already), as a refusal by IAM would.
func TestAnUnassignResumedWithinTheDescribeLagKeepsItsIPsOutOfThePool(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	lag := 90 * time.Second
	w.sim.Faults().SetUnassignLag(lag)
	c := &crash{}
	dieAtUnassign := unassignThenCrash{crashEC2: crashEC2{EC2API: w.ec2(nil), c: c}}
	r := w.start(surplusConfig(w.dir), dieAtUnassign, func(j controller.Journal) controller.Journal { return crashJournal{inner: j, c: c} })
	waitReady(t, r.node)
	for i := range 6 {
		assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
	}
	for i := range 6 {
		if _, err := r.node.Release(context.Background(), api0Release(fmt.Sprintf("pod-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the node dies right after its unassign", func() error {
		if !c.dead.Load() {
			return fmt.Errorf("no unassign yet")
		}
		return nil
	})
	r.stop()
	unassigned := map[string]string{}
	for _, op := range r.node.Snapshot().IPOps {
		for _, ip := range op.IPs {
			unassigned[ip] = op.ENI
		}
	}
	if len(unassigned) == 0 {
		t.Fatal("the journal holds no pending unassign at the crash")
	}
	w.restartKeepsOut(t, unassigned, lag)
}

// restartKeepsOut starts the node again (surplusConfig) within the Describe lag and fails t when a pod gets an
// address of unassigned (IP -> the ENI the node took it from before it stopped) that EC2 does not hold on that
// ENI, or when one comes back into the books for half the lag.
func (w *world) restartKeepsOut(t *testing.T, unassigned map[string]string, lag time.Duration) {
	t.Helper()
	r := w.start(surplusConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	for i := range 8 {
		a := assignRetrying(t, r.node, fmt.Sprintf("later-%d", i))
		if eni, ok := unassigned[a.IP]; ok && w.ec2IPs()[a.IP] != eni {
			t.Fatalf("pod later-%d got %s, which the node unassigned from %s before it stopped", i, a.IP, eni)
		}
	}
	w.passVirtual(lag/2, func() { w.noneBack(t, r.node, unassigned) })
}

// unassignThenCrash kills the node at its first unassign, once EC2 has applied it.
type unassignThenCrash struct{ crashEC2 }

func (e unassignThenCrash) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, o ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	if e.c.dead.Load() {
		return nil, errCrashed
	}
	_, err := e.EC2API.UnassignPrivateIpAddresses(ctx, in, o...)
	e.c.dead.Store(true)
	if err != nil {
		return nil, err
	}
	return nil, errCrashed
}
