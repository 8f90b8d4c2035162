package sgpool

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

var (
	t0     = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	m5     = Limits{Slots: 3, IPsPerENI: 9, Grain: 1}
	setA   = "sg-000000000000000a1"
	setAB  = "sg-000000000000000a1,sg-000000000000000b2"
	demand = func(set string, n int) Demand {
		return Demand{Set: set, Groups: Groups(set), Policies: []string{"default/p"}, Waiting: n}
	}
)

// books is a node with its primary ENI (two pods) and the given ENIs.
func books(enis ...journal.ENI) *journal.State {
	st := &journal.State{ENIs: []journal.ENI{{ID: "eni-primary", State: journal.Ready, Primary: true, DeviceIndex: 0,
		IPs: []string{"10.0.0.10", "10.0.0.11"}}}}
	st.Assignments = []journal.Assignment{{ContainerID: "a", IP: "10.0.0.10", ENI: "eni-primary"}}
	st.ENIs = append(st.ENIs, enis...)
	return st
}

func setENI(id, set string, ips ...string) journal.ENI {
	return journal.ENI{ID: id, State: journal.Ready, GroupSet: set, SecurityGroups: Groups(set), DeviceIndex: 1, IPs: ips}
}

func decide(st *journal.State, d []Demand, l Limits, idle *Idle, now time.Time) ([]Action, []NoSlot) {
	return Decide(st, pool.NewView(st, now), d, l, idle, time.Minute, now)
}

func TestTheFirstPodOfASetAsksForAnENIWithItsGroups(t *testing.T) {
	acts, full := decide(books(), []Demand{demand(setAB, 3)}, m5, &Idle{}, t0)
	if len(full) != 0 || len(acts) != 1 || acts[0].Kind != NewENI || acts[0].Set != setAB || acts[0].Slots != 4 ||
		strings.Join(acts[0].Groups, ",") != setAB {
		t.Fatalf("got %+v, %+v; want one NewENI of set %s with 4 slots (3 pods and 1 spare)", acts, full, setAB)
	}
}

func TestASetsFreeAddressesAndWhatIsInFlightServeItsPods(t *testing.T) {
	st := books(setENI("eni-a", setA, "10.0.1.1", "10.0.1.2"))
	if acts, _ := decide(st, []Demand{demand(setA, 2)}, m5, &Idle{}, t0); len(acts) != 0 {
		t.Errorf("two free addresses for two pods: got %+v, want nothing", acts)
	}
	acts, _ := decide(st, []Demand{demand(setA, 5)}, m5, &Idle{}, t0)
	if len(acts) != 1 || acts[0].Kind != AddSlots || acts[0].ENI != "eni-a" || acts[0].Slots != 4 {
		t.Errorf("five pods, two free: got %+v, want 4 more slots (3 and a spare) on eni-a", acts)
	}
	st.IPOps = []journal.IPOp{{Kind: journal.AssignIPs, ENI: "eni-a", Count: 4}}
	if acts, _ := decide(st, []Demand{demand(setA, 5)}, m5, &Idle{}, t0); len(acts) != 0 {
		t.Errorf("an assign of 4 in flight covers them: got %+v, want nothing", acts)
	}
	pending := books(journal.ENI{OpID: "op-1", State: journal.Planned, GroupSet: setA, WantIPs: 4, DeviceIndex: -1})
	if acts, _ := decide(pending, []Demand{demand(setA, 2)}, m5, &Idle{}, t0); len(acts) != 0 {
		t.Errorf("an ENI on its way covers them: got %+v, want nothing", acts)
	}
}

func TestASetWithNoSlotIsNamedWithTheLimitAndWhatHoldsTheSlots(t *testing.T) {
	dflt := journal.ENI{ID: "eni-d", State: journal.Ready, DeviceIndex: 2, IPs: []string{"10.0.2.1"}}
	st := books(setENI("eni-a", setA, "10.0.1.1"), dflt)
	acts, full := decide(st, []Demand{demand(setAB, 1)}, m5, &Idle{}, t0)
	if len(acts) != 0 || len(full) != 1 || full[0].Demand.Set != setAB {
		t.Fatalf("got %+v, %+v; want set %s without a slot", acts, full, setAB)
	}
	for _, want := range []string{"may hold 3 ENIs", "1 ENI of the default pool", "1 ENI of set " + setA, "at most 2 sets"} {
		if !strings.Contains(full[0].Why, want) {
			t.Errorf("%q does not say %q", full[0].Why, want)
		}
	}
}

func TestAnEmptySetsENIGoesBackAfterTheDelayUnlessItsPodsComeBack(t *testing.T) {
	st := books(setENI("eni-a", setA, "10.0.1.1"))
	idle := &Idle{}
	if acts, _ := decide(st, nil, m5, idle, t0); len(acts) != 0 {
		t.Fatalf("just emptied: got %+v, want nothing", acts)
	}
	if acts, _ := decide(st, []Demand{demand(setA, 1)}, m5, idle, t0.Add(30*time.Second)); len(acts) != 0 {
		t.Fatalf("a pod of the set waits (the free address serves it): got %+v", acts)
	}
	if acts, _ := decide(st, nil, m5, idle, t0.Add(80*time.Second)); len(acts) != 0 {
		t.Fatalf("the pod's wait restarted the delay: got %+v, want nothing yet", acts)
	}
	acts, _ := decide(st, nil, m5, idle, t0.Add(141*time.Second))
	if len(acts) != 1 || acts[0].Kind != ReleaseENI || acts[0].ENI != "eni-a" {
		t.Errorf("empty for a minute: got %+v, want eni-a released", acts)
	}
	st.Assignments = append(st.Assignments, journal.Assignment{ContainerID: "b", IP: "10.0.1.1", ENI: "eni-a"})
	if acts, _ := decide(st, nil, m5, &Idle{}, t0.Add(time.Hour)); len(acts) != 0 {
		t.Errorf("a pod holds it: got %+v, want it kept", acts)
	}
}

func TestAnENIWhoseGroupsAreNotItsSetsServesNoPodAndGoesWhenEmpty(t *testing.T) {
	e := setENI("eni-a", setA, "10.0.1.1")
	e.SecurityGroups = []string{"sg-0000000000000000ff"} // changed outside eniwire
	st := books(e)
	if _, _, ok := pool.NewView(st, t0).PickInSet(setA, nil); ok {
		t.Error("a pod of the set was given an address of an ENI with other groups")
	}
	acts, _ := decide(st, nil, m5, &Idle{}, t0)
	if len(acts) != 1 || acts[0].Kind != ReleaseENI {
		t.Errorf("got %+v, want the ENI released at once", acts)
	}
}

func TestPrefixModeAsksForWholePrefixes(t *testing.T) {
	l := Limits{Slots: 3, IPsPerENI: 9, Grain: journal.PrefixAddrs}
	acts, _ := decide(books(), []Demand{demand(setA, 20)}, l, &Idle{}, t0)
	if len(acts) != 1 || acts[0].Kind != NewENI || acts[0].Slots != 2 {
		t.Errorf("20 pods in prefix mode: got %+v, want a new ENI with 2 prefixes", acts)
	}
}

func TestTheSetKeyIsTheSortedUnion(t *testing.T) {
	for _, c := range [][]string{{"sg-b", "sg-a"}, {"sg-a", "sg-b", "sg-a"}, {"", "sg-b", "sg-a"}} {
		if got := Key(c); got != "sg-a,sg-b" {
			t.Errorf("Key(%q) = %q, want sg-a,sg-b", c, got)
		}
	}
	if got := fmt.Sprint(Groups("")); got != "[]" {
		t.Errorf("Groups(\"\") = %s", got)
	}
}
