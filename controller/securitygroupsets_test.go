package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// Groups of the security-group set tests, made in the simulated VPC by withSetGroups.
const (
	groupDBClients = "sg-0db0c11e0000000a1"
	groupCache     = "sg-0cac4e000000000a2"
	groupMissing   = "sg-0dead0000000000a3" // never made: EC2 refuses an ENI with it
)

// podSets is a PodSecurityGroups that gives pods their sets by name prefix, as SecurityGroupPolicies by label
// would, and remembers what the controller told it of running pods.
type podSets struct {
	byPrefix map[string][]string
	policy   string

	mu      sync.Mutex
	started map[string][]string
	refused map[string]string
}

func (s *podSets) SecurityGroupsOf(_ context.Context, namespace, name, _ string) (groups, policies []string, err error) {
	for prefix, g := range s.byPrefix {
		if strings.HasPrefix(name, prefix) {
			return g, []string{namespace + "/" + s.policy}, nil
		}
	}
	return nil, nil, nil
}

func (s *podSets) Started(namespace, name, _ string, groups []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started == nil {
		s.started = map[string][]string{}
	}
	s.started[namespace+"/"+name] = groups
}

func (s *podSets) Stopped(namespace, name, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.started, namespace+"/"+name)
}

func (s *podSets) Refused(namespace, name, _, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = map[string]string{}
	}
	s.refused[namespace+"/"+name] = why
}

func (s *podSets) refusal(pod string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused["default/"+pod]
}

func (s *podSets) startedWith(pod string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.started["default/"+pod]
	return g, ok
}

// withSetGroups makes the groups the sets name in the world's VPC.
func (w *world) withSetGroups() *world {
	w.t.Helper()
	for _, g := range []string{groupDBClients, groupCache} {
		if _, err := w.sim.AddSecurityGroup(ec2sim.SecurityGroupSpec{ID: g, VPCID: w.inst.VPCID, Name: g}); err != nil {
			w.t.Fatal(err)
		}
	}
	return w
}

// assignPod asks once for an IP for the pod named name (namespace default).
func assignPod(n *controller.Node, name string) (*api.Assignment, error) {
	return n.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: name, IfName: "eth0"},
		Netns: testNetnsDir + name, Pod: api.PodIdentity{Namespace: "default", Name: name, UID: "uid-" + name}})
}

func assignPodRetrying(t testing.TB, n *controller.Node, name string) *api.Assignment {
	t.Helper()
	var out *api.Assignment
	eventually(t, 30*time.Second, "assigning "+name, func() error {
		a, err := assignPod(n, name)
		out = a
		return err
	})
	return out
}

// simGroups is what EC2 says the ENI's groups are.
func (w *world) simGroups(eniID string) []string {
	for _, e := range w.sim.Snapshot().ENIs {
		if e.ID == eniID {
			g := slices.Clone(e.Groups)
			slices.Sort(g)
			return g
		}
	}
	return nil
}

// setENIs are the books' ENIs of set.
func setENIs(st *journal.State, set string) []journal.ENI {
	var out []journal.ENI
	for _, e := range st.ENIs {
		if e.GroupSet == set {
			out = append(out, e)
		}
	}
	return out
}

func setsConfig(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.WarmIPTarget = 2 // the default pool stays on the primary ENI: the other slots are the sets'
	return cfg
}

// TestPodsOfASetTakeAddressesOfAnENIWithExactlyItsGroups: the first pod of a set waits for an ENI created
// with the set's groups (one commit: create, attach, modify); the next pod of the set takes another address
// of it without a create; a pod of no set takes the default pool's; a second set gets an ENI of its own;
// once the set's pods are gone its ENI goes back after the release delay.
func TestPodsOfASetTakeAddressesOfAnENIWithExactlyItsGroups(t *testing.T) {
	w := newWorld(t, "m5.large", 200).withSetGroups()
	sets := &podSets{policy: "db-access", byPrefix: map[string][]string{
		// Out of order and repeated: the set is the sorted union.
		"db-":    {groupDBClients, groupCache, groupDBClients},
		"cache-": {groupCache},
	}}
	reg := prometheus.NewRegistry()
	r := w.startWith(setsConfig(w.dir), controller.Deps{PodSecurityGroups: sets, Registerer: reg})
	waitReady(t, r.node)
	dbSet := groupCache + "," + groupDBClients

	web := assignPodRetrying(t, r.node, "web-1")
	creates0 := w.sim.Counters()["CreateNetworkInterface"].Calls
	db1 := assignPodRetrying(t, r.node, "db-1")
	st := r.node.Snapshot()
	if e := st.ENIByID(db1.ENI); e == nil || e.GroupSet != dbSet {
		t.Fatalf("db-1 got %s on ENI %s, books %+v: want an ENI of set %s", db1.IP, db1.ENI, e, dbSet)
	}
	if got := w.simGroups(db1.ENI); !slices.Equal(got, []string{groupCache, groupDBClients}) {
		t.Errorf("EC2 says db-1's ENI %s carries %v, want exactly %s", db1.ENI, got, dbSet)
	}
	if e := st.ENIByID(web.ENI); e == nil || e.GroupSet != "" || !e.Primary {
		t.Errorf("web-1 (no set) got ENI %s (%+v), want the default pool's primary", web.ENI, e)
	}
	db2 := assignPodRetrying(t, r.node, "db-2")
	if db2.ENI != db1.ENI {
		t.Errorf("db-2 got ENI %s, want the set's ENI %s", db2.ENI, db1.ENI)
	}
	if n := w.sim.Counters()["CreateNetworkInterface"].Calls - creates0; n != 1 {
		t.Errorf("two pods of one set cost %d creates, want 1", n)
	}
	if g, ok := sets.startedWith("db-2"); !ok || !slices.Equal(g, []string{groupCache, groupDBClients}) {
		t.Errorf("the controller told the watch db-2 started with %v (%v), want %s", g, ok, dbSet)
	}
	cache1 := assignPodRetrying(t, r.node, "cache-1")
	if cache1.ENI == db1.ENI || cache1.ENI == web.ENI {
		t.Fatalf("cache-1 got ENI %s, want one of its own", cache1.ENI)
	}
	if got := w.simGroups(cache1.ENI); !slices.Equal(got, []string{groupCache}) {
		t.Errorf("cache-1's ENI carries %v, want [%s]", got, groupCache)
	}
	status := r.node.Status()
	var dbStatus *api.SecurityGroupSetStatus
	for i := range status.SecurityGroupSets {
		if status.SecurityGroupSets[i].Set == dbSet {
			dbStatus = &status.SecurityGroupSets[i]
		}
	}
	if dbStatus == nil || dbStatus.Assigned != 2 || !slices.Equal(dbStatus.ENIs, []string{db1.ENI}) {
		t.Errorf("status of set %s is %+v, want 2 assigned on %s (all sets: %+v)", dbSet, dbStatus, db1.ENI, status.SecurityGroupSets)
	}

	eventually(t, 10*time.Second, "eniwire_security_group_set_ips says the set's pods", func() error {
		if got := setIPsMetric(t, reg, dbSet, "assigned"); got != 2 {
			return fmt.Errorf("eniwire_security_group_set_ips{set=%q,state=assigned} = %v, want 2", dbSet, got)
		}
		return nil
	})

	releasePod(t, r.node, "db-1")
	releasePod(t, r.node, "db-2")
	eventually(t, 30*time.Second, "the set's ENI goes back once its pods are gone", func() error {
		if g := w.simGroups(db1.ENI); g != nil {
			return fmt.Errorf("ENI %s still exists with %v; books %+v", db1.ENI, g, setENIs(r.node.Snapshot(), dbSet))
		}
		return nil
	})
	if st := r.node.Snapshot(); st.ENIByID(cache1.ENI) == nil {
		t.Errorf("the other set's ENI %s, whose pod stays, went too", cache1.ENI)
	}
	if _, ok := sets.startedWith("db-1"); ok {
		t.Error("the watch still holds db-1 as running after its release")
	}
}

// TestASetWithNoSlotFailsItsADDAndNoOtherPod: an m5.large takes three ENIs; an operator's ENI holds one
// and the primary another. The first set takes the last; a pod of a second set fails at once, naming its
// policy, its set and the limit, while pods of the first set and of the default pool still get addresses.
func TestASetWithNoSlotFailsItsADDAndNoOtherPod(t *testing.T) {
	w := newWorld(t, "m5.large", 200).withSetGroups()
	w.attachForeignENI(1)
	sets := &podSets{policy: "cache-access", byPrefix: map[string][]string{"db-": {groupDBClients}, "cache-": {groupCache}}}
	r := w.startWith(setsConfig(w.dir), controller.Deps{PodSecurityGroups: sets})
	waitReady(t, r.node)
	assignPodRetrying(t, r.node, "db-1")
	_, err := assignPod(r.node, "cache-1")
	for i := 0; err != nil && !strings.Contains(err.Error(), "no ENI slot") && i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		_, err = assignPod(r.node, "cache-1")
	}
	if err == nil || !errors.Is(err, controller.ErrNoIP) {
		t.Fatalf("cache-1's ADD answered %v, want ErrNoIP for want of a slot", err)
	}
	for _, want := range []string{groupCache, "default/cache-access", "may hold 2 ENIs", "at most 1 set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("cache-1's error %q does not say %q", err, want)
		}
	}
	if got := sets.refusal("cache-1"); got != err.Error() {
		t.Errorf("the watch was told %q of cache-1, want the ADD's error %q (an Event on the pod)", got, err)
	}
	assignPodRetrying(t, r.node, "db-2")
	assignPodRetrying(t, r.node, "web-1")
	var blocked string
	for _, s := range r.node.Status().SecurityGroupSets {
		if s.Set == groupCache {
			blocked = s.Blocked
		}
	}
	if !strings.Contains(blocked, "no ENI slot") {
		t.Errorf("status of set %s says blocked %q, want the missing slot", groupCache, blocked)
	}
}

// TestEC2RefusingASetsGroupsFailsItsPodsAlone: a policy names a group that does not exist; EC2 refuses the
// set's create; its pod's ADD fails with EC2's word, and neither the default pool nor another set pauses.
func TestEC2RefusingASetsGroupsFailsItsPodsAlone(t *testing.T) {
	w := newWorld(t, "m5.large", 200).withSetGroups()
	sets := &podSets{policy: "typo", byPrefix: map[string][]string{"bad-": {groupMissing}, "db-": {groupDBClients}}}
	r := w.startWith(setsConfig(w.dir), controller.Deps{PodSecurityGroups: sets})
	waitReady(t, r.node)
	var err error
	eventually(t, 30*time.Second, "bad-1's ADD fails with EC2's refusal", func() error {
		_, err = assignPod(r.node, "bad-1")
		if err != nil && strings.Contains(err.Error(), "InvalidGroup.NotFound") {
			return nil
		}
		return fmt.Errorf("ADD answered %v", err)
	})
	if !strings.Contains(err.Error(), groupMissing) {
		t.Errorf("bad-1's error %q does not name the set %s", err, groupMissing)
	}
	assignPodRetrying(t, r.node, "db-1")
	for i := range 12 {
		assignPodRetrying(t, r.node, fmt.Sprintf("web-%d", i)) // past the primary's 9: the default pool grows an ENI
	}
	if st := r.node.Snapshot(); len(setENIs(st, groupMissing)) != 0 {
		t.Errorf("the books hold an ENI of the refused set: %+v", setENIs(st, groupMissing))
	}
}

// TestASetsENIComesWithPrefixesInPrefixMode: in prefix mode the set's ENI is created with a /28 and its
// pods take addresses of it.
func TestASetsENIComesWithPrefixesInPrefixMode(t *testing.T) {
	w := newWorld(t, "m5.large", 200).withSetGroups()
	sets := &podSets{policy: "db-access", byPrefix: map[string][]string{"db-": {groupDBClients}}}
	cfg := setsConfig(w.dir)
	cfg.EnablePrefixDelegation = true
	r := w.startWith(cfg, controller.Deps{PodSecurityGroups: sets})
	waitReady(t, r.node)
	a := assignPodRetrying(t, r.node, "db-1")
	b := assignPodRetrying(t, r.node, "db-2")
	e := r.node.Snapshot().ENIByID(a.ENI)
	if e == nil || e.GroupSet != groupDBClients || len(e.IPs) != 1 || !journal.IsPrefix(e.IPs[0]) {
		t.Fatalf("db-1's ENI is %+v, want an ENI of set %s holding one /28", e, groupDBClients)
	}
	if b.ENI != a.ENI {
		t.Errorf("db-2 got ENI %s, want the set's %s", b.ENI, a.ENI)
	}
}

// onItsSetsENI says whether pod cid's assignment a is where its set says: for a pod of a set, an address
// of an ENI of the set whose groups in EC2 are exactly the set's; for another, the default pool.
func (w *world) onItsSetsENI(st *journal.State, sets *podSets, cid string, a *api.Assignment) error {
	groups, _, _ := sets.SecurityGroupsOf(context.Background(), "default", cid, "")
	set := journal.GroupSetKey(groups)
	e := st.ENIByID(a.ENI)
	switch {
	case e == nil:
		return fmt.Errorf("%s got %s of ENI %s, which the books do not hold", cid, a.IP, a.ENI)
	case e.GroupSet != set:
		return fmt.Errorf("%s (set %q) got %s of ENI %s, of set %q", cid, set, a.IP, a.ENI, e.GroupSet)
	case set != "" && journal.GroupSetKey(w.simGroups(a.ENI)) != set:
		return fmt.Errorf("%s (set %q) got %s of ENI %s, whose groups in EC2 are %v", cid, set, a.IP, a.ENI, w.simGroups(a.ENI))
	}
	return nil
}

// setIPsMetric reads eniwire_security_group_set_ips{set, state} from reg (-1 when it is not served).
func setIPsMetric(t testing.TB, reg *prometheus.Registry, set, state string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "eniwire_security_group_set_ips" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["set"] == set && labels["state"] == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
