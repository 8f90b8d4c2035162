package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// Subnets of the pod world: the node's own (10.0.0.0/20, zone a) and, in the secondary block 100.64.0.0/16,
// subnets tagged for pods or not, in the node's zone or not.
const (
	podA1        = "subnet-0000000000000a001" // role/cni=1, zone a, /19: the most free addresses
	podA2        = "subnet-0000000000000a002" // role/cni=1 and this cluster's tag, zone a, /20
	otherCluster = "subnet-0000000000000a003" // role/cni=1 but another cluster's, zone a
	untagged     = "subnet-0000000000000a004" // no tag, zone a
	excluded     = "subnet-0000000000000a005" // role/cni=0, zone a
	podB         = "subnet-0000000000000b001" // role/cni=1, zone b
)

// newPodWorld is newWorld (an m5.large in subnet-1, 10.0.0.0/20, zone us-west-2a, cluster "test") with the
// VPC's secondary block 100.64.0.0/16 and the subnets above.
func newPodWorld(t *testing.T) *world { return newPodWorldOf(t, "m5.large") }

// newPodWorldOf is newPodWorld with an instance of type itype.
func newPodWorldOf(t *testing.T, itype string) *world {
	t.Helper()
	w := newWorld(t, itype, 200)
	if _, err := w.sim.AddVPCCIDRBlock("vpc-1", "100.64.0.0/16"); err != nil {
		t.Fatal(err)
	}
	role := func(v string, more ...string) map[string]string {
		tags := map[string]string{subnet.TagCNIRole: v}
		for i := 0; i+1 < len(more); i += 2 {
			tags[more[i]] = more[i+1]
		}
		return tags
	}
	for _, sn := range []ec2sim.SubnetSpec{
		{ID: podA1, VPCID: "vpc-1", CIDR: "100.64.0.0/19", AZ: "us-west-2a", Tags: role("1")},
		{ID: podA2, VPCID: "vpc-1", CIDR: "100.64.32.0/20", AZ: "us-west-2a", Tags: role("1", "kubernetes.io/cluster/test", "shared")},
		{ID: otherCluster, VPCID: "vpc-1", CIDR: "100.64.48.0/20", AZ: "us-west-2a", Tags: role("1", "kubernetes.io/cluster/other", "owned")},
		{ID: untagged, VPCID: "vpc-1", CIDR: "10.0.16.0/20", AZ: "us-west-2a"},
		{ID: excluded, VPCID: "vpc-1", CIDR: "10.0.32.0/20", AZ: "us-west-2a", Tags: role("0")},
		{ID: podB, VPCID: "vpc-1", CIDR: "100.64.64.0/19", AZ: "us-west-2b", Tags: role("1")},
	} {
		if err := w.sim.AddSubnet(sn); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// podNode is the world's node as the agent learns it from IMDS: with its VPC id, which discovery needs.
func (w *world) podNode() metadata.Node {
	info := w.nodeInfo()
	info.VPCID = w.inst.VPCID
	return info
}

// recordingDriver is a datapath that remembers the ENIs it brought up and the VPC CIDR sets it was told.
type recordingDriver struct {
	dptypes.NoDriver
	mu   sync.Mutex
	enis map[string]dptypes.ENI
	vpcs [][]netip.Prefix
}

func newRecordingDriver() *recordingDriver { return &recordingDriver{enis: map[string]dptypes.ENI{}} }

func (d *recordingDriver) ENIUp(_ context.Context, e dptypes.ENI) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.enis[e.ID] = e
	return nil
}

func (d *recordingDriver) SetVPCCIDRs(_ context.Context, cidrs []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.vpcs = append(d.vpcs, slices.Clone(cidrs))
	return nil
}

func (d *recordingDriver) eni(id string) (dptypes.ENI, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.enis[id]
	return e, ok
}

// secondaries returns the books' secondary ENIs with an id.
func secondaries(st *journal.State) []journal.ENI {
	var out []journal.ENI
	for _, e := range st.ENIs {
		if !e.Primary && e.ID != "" {
			out = append(out, e)
		}
	}
	return out
}

// checkENISubnets asserts that every secondary ENI of the books is recorded in the subnet EC2 created it in,
// with that subnet's CIDR, and that the datapath got that subnet's gateway for it.
func (w *world) checkENISubnets(st *journal.State, dp *recordingDriver) error {
	snap := w.sim.Snapshot()
	cidrs := map[string]string{}
	for _, sn := range snap.Subnets {
		cidrs[sn.ID] = sn.CIDR
	}
	for _, e := range secondaries(st) {
		i := slices.IndexFunc(snap.ENIs, func(s ec2sim.ENIState) bool { return s.ID == e.ID })
		if i < 0 {
			return fmt.Errorf("ENI %s not in EC2", e.ID)
		}
		sim := snap.ENIs[i]
		if e.SubnetID != sim.SubnetID || e.SubnetCIDR != cidrs[sim.SubnetID] {
			return fmt.Errorf("ENI %s recorded in %s (%s), EC2 has it in %s (%s)", e.ID, e.SubnetID, e.SubnetCIDR, sim.SubnetID, cidrs[sim.SubnetID])
		}
		if !e.Usable() {
			continue
		}
		up, ok := dp.eni(e.ID)
		want := subnet.Gateway(cidrs[sim.SubnetID])
		if !ok || up.Gateway.String() != want || up.Subnet.String() != e.SubnetCIDR {
			return fmt.Errorf("datapath ENI %s: %+v (up %v), want gateway %s of %s", e.ID, up, ok, want, cidrs[sim.SubnetID])
		}
	}
	return nil
}

// waitENISubnets waits until checkENISubnets holds: the datapath brings a new ENI up a round after it is ready.
func (w *world) waitENISubnets(r *running, dp *recordingDriver) {
	w.t.Helper()
	eventually(w.t, 20*time.Second, "every ENI in its subnet, up in the datapath", func() error {
		return w.checkENISubnets(r.node.Snapshot(), dp)
	})
}

func subnetIDs(ss []api.SubnetStatus) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

func TestSubnetDiscoveryTakesTheZonesTaggedSubnetsMostFreeFirst(t *testing.T) {
	for _, c := range []struct {
		name string
		// nodeTag, if set, is the node subnet's kubernetes.io/role/cni tag.
		nodeTag  string
		disabled bool
		want     []string
	}{
		// podA1 (/19) has more free addresses than podA2 (/20: 4091), which has one more than the node's own
		// subnet (/20, the primary IP taken). otherCluster is another cluster's, untagged needs role/cni=1,
		// excluded says 0, podB is in another zone.
		{name: "tagged subnets of the zone and the node's own, most free first", want: []string{podA1, podA2, "subnet-1"}},
		{name: "role/cni=0 excludes the node's own subnet too", nodeTag: "0", want: []string{podA1, podA2}},
		{name: "discovery off: the node's own subnet only", disabled: true, want: []string{"subnet-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newPodWorld(t)
			if c.nodeTag != "" {
				if err := w.sim.SetTags("subnet-1", map[string]string{subnet.TagCNIRole: c.nodeTag}); err != nil {
					t.Fatal(err)
				}
			}
			dp := newRecordingDriver()
			cfg := fastConfig(w.dir)
			cfg.DisableSubnetDiscovery = c.disabled
			r := w.startWith(cfg, controller.Deps{Node: w.podNode(), Datapath: dp})
			waitReady(t, r.node)
			// 10 pods are more than the primary's 9 IPs: the node needs a secondary ENI.
			assignPods(t, r.node, map[string]string{}, 0, 10)
			// The pod waiting and WARM_ENI_TARGET=1 may bring two ENIs in one growth step (growth counts the pods
			// waiting): the first is the one the placement is judged by.
			eventually(t, 20*time.Second, "a secondary ENI ready", func() error {
				if n := readySecondaries(r.node.Snapshot()); n < 1 {
					return fmt.Errorf("%d ready", n)
				}
				return nil
			})
			if got := subnetIDs(r.node.Status().Subnets); !slices.Equal(got, c.want) {
				t.Fatalf("candidate subnets %v, want %v", got, c.want)
			}
			st := r.node.Snapshot()
			if e := secondaries(st)[0]; e.SubnetID != c.want[0] {
				t.Fatalf("the first ENI went to %s, want %s (the candidate with the most free addresses)", e.SubnetID, c.want[0])
			}
			w.waitENISubnets(r, dp)
		})
	}
}

func TestAnExhaustedSubnetSendsTheNextENIToTheNextCandidate(t *testing.T) {
	// An m5.xlarge: 4 ENIs of 14 secondary IPs.
	w := newPodWorldOf(t, "m5.xlarge")
	dp := newRecordingDriver()
	r := w.startWith(fastConfig(w.dir), controller.Deps{Node: w.podNode(), Datapath: dp})
	waitReady(t, r.node)
	answered := map[string]string{}
	// 15 pods fill the primary and start the first ENI; WARM_ENI_TARGET=1 adds a second: both in podA1.
	assignPods(t, r.node, answered, 0, 15)
	eventually(t, 20*time.Second, "two secondary ENIs ready", func() error {
		if n := readySecondaries(r.node.Snapshot()); n != 2 {
			return fmt.Errorf("%d ready", n)
		}
		return nil
	})
	// podA1 runs out while the node's list still says it has the most free addresses: the create is refused
	// and the next ENI goes to podA2.
	if _, err := w.sim.ExhaustSubnet(podA1, 0); err != nil {
		t.Fatal(err)
	}
	creates := w.sim.Counters()["CreateNetworkInterface"].Calls
	// 15 more pods leave fewer than an ENI's worth free: a third ENI.
	assignPods(t, r.node, answered, 15, 30)
	eventually(t, 30*time.Second, "a third secondary ENI ready", func() error {
		if n := readySecondaries(r.node.Snapshot()); n != 3 {
			return fmt.Errorf("%d ready", n)
		}
		return nil
	})
	st := r.node.Snapshot()
	var subnets []string
	for _, e := range secondaries(st) {
		subnets = append(subnets, e.SubnetID)
	}
	if want := []string{podA1, podA1, podA2}; !slices.Equal(subnets, want) {
		t.Fatalf("ENIs in subnets %v, want %v", subnets, want)
	}
	if n := w.sim.Counters()["CreateNetworkInterface"].Calls - creates; n > 3 {
		t.Errorf("%d creates for one ENI after the exhaustion, want the refused one and the one that worked", n)
	}
	w.waitENISubnets(r, dp)
	eventually(t, 20*time.Second, "every ENI at rest", func() error { return w.checkBooks(r.node.Snapshot(), answered) })
	for _, a := range st.Assignments {
		if e := st.ENIByID(a.ENI); e == nil || !journal.Covers(e.SubnetCIDR, a.IP) {
			t.Fatalf("pod %s has %s of ENI %s outside its subnet", a.ContainerID, a.IP, a.ENI)
		}
	}
	got := r.node.Status().Subnets
	if i := slices.IndexFunc(got, func(s api.SubnetStatus) bool { return s.ID == podA1 }); i < 0 || !got[i].Refused || got[i].Free != 0 {
		t.Errorf("status subnets %+v, want %s marked refused with no free address", got, podA1)
	}
}

func TestTheDatapathLearnsABlockAssociatedWithTheVPCLater(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	dp := newRecordingDriver()
	cfg := fastConfig(w.dir)
	cfg.VPCRefreshInterval = time.Minute
	info := w.podNode()
	r := w.startWith(cfg, controller.Deps{Node: info, Datapath: dp})
	waitReady(t, r.node)
	// IMDS's list is what the datapath was opened with: an unchanged set is not told again.
	w.passVirtual(10*time.Second, nil)
	dp.mu.Lock()
	told := len(dp.vpcs)
	dp.mu.Unlock()
	if told != 0 {
		t.Fatalf("the datapath was told %d times of an unchanged set", told)
	}
	describes := w.sim.Counters()["DescribeVpcs"].Calls
	if _, err := w.sim.AddVPCCIDRBlock("vpc-1", "100.64.0.0/16"); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}
	eventually(t, 20*time.Second, "the datapath told of 100.64.0.0/16", func() error {
		dp.mu.Lock()
		defer dp.mu.Unlock()
		if len(dp.vpcs) == 0 || !slices.Equal(dp.vpcs[len(dp.vpcs)-1], want) {
			return fmt.Errorf("told %v", dp.vpcs)
		}
		return nil
	})
	w.passVirtual(3*time.Minute, nil)
	if n := w.sim.Counters()["DescribeVpcs"].Calls - describes; n > 5 {
		t.Errorf("%d DescribeVpcs in about 3 virtual minutes, want at most one a minute", n)
	}
	if got := r.node.Status().VPCCIDRs; !slices.Equal(got, []string{"10.0.0.0/16", "100.64.0.0/16"}) {
		t.Errorf("status VPC CIDRs %v", got)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if len(dp.vpcs) != 1 {
		t.Errorf("the datapath was told %d times, want once: %v", len(dp.vpcs), dp.vpcs)
	}
}

var errAPIDown = errors.New("dial tcp 10.96.0.1:443: connect: connection refused")

// fakeENIConfigs is an ENIConfigSource the test sets.
type fakeENIConfigs struct {
	mu  sync.Mutex
	c   subnet.ENIConfig
	ok  bool
	why string
	err error
}

func (f *fakeENIConfigs) Current() (subnet.ENIConfig, bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.c, f.ok, f.why
}

func (f *fakeENIConfigs) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeENIConfigs) set(c subnet.ENIConfig, ok bool, why string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.c, f.ok, f.why, f.err = c, ok, why, err
}

// startCustom starts the pod world's node with custom networking and src.
func (w *world) startCustom(src *fakeENIConfigs, dp *recordingDriver) *running {
	cfg := fastConfig(w.dir)
	cfg.CustomNetworking = true
	return w.startWith(cfg, controller.Deps{Node: w.podNode(), Datapath: dp, ENIConfigs: src})
}

func statusHas(t *testing.T, r *running, what string, field func(*api.Status) string, wants ...string) {
	t.Helper()
	eventually(t, 20*time.Second, what, func() error {
		got := field(r.node.Status())
		for _, want := range wants {
			if !strings.Contains(got, want) {
				return fmt.Errorf("status %q lacks %q", got, want)
			}
		}
		return nil
	})
}

func customLine(s *api.Status) string { return s.CustomNetworking }
func poolLine(s *api.Status) string   { return s.PoolStatus }

func TestCustomNetworkingPutsPodsOnENIsOfTheENIConfigsSubnet(t *testing.T) {
	w := newPodWorld(t)
	group, err := w.sim.AddSecurityGroup(ec2sim.SecurityGroupSpec{VPCID: "vpc-1", Name: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeENIConfigs{}
	src.set(subnet.ENIConfig{Name: "us-west-2a", Subnet: podA2, SecurityGroups: []string{group}}, true, "", nil)
	dp := newRecordingDriver()
	r := w.startCustom(src, dp)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 12)
	st := r.node.Snapshot()
	primary := ""
	for _, e := range st.ENIs {
		if e.Primary {
			primary = e.ID
			if len(e.IPs) != 0 {
				t.Errorf("the primary ENI holds pod IPs %v", e.IPs)
			}
		}
	}
	for _, a := range st.Assignments {
		e := st.ENIByID(a.ENI)
		if a.ENI == primary || e == nil || e.SubnetID != podA2 {
			t.Fatalf("pod %s got %s of ENI %s, want an ENI in %s", a.ContainerID, a.IP, a.ENI, podA2)
		}
	}
	snap := w.sim.Snapshot()
	for _, e := range snap.ENIs {
		if e.ID != primary && e.Attachment != nil && !slices.Equal(e.Groups, []string{group}) {
			t.Errorf("ENI %s has groups %v, want the ENIConfig's %s", e.ID, e.Groups, group)
		}
	}
	w.waitENISubnets(r, dp)
	eventually(t, 20*time.Second, "every ENI at rest", func() error { return w.checkBooks(r.node.Snapshot(), answered) })
	s := r.node.Status()
	if s.MaxPods != 20 {
		t.Errorf("max pods %d, want (3-1)*(10-1)+2 = 20 for an m5.large with custom networking", s.MaxPods)
	}
	if want := "custom networking: ENIConfig us-west-2a subnet " + podA2; s.CustomNetworking != want {
		t.Errorf("status %q, want %q", s.CustomNetworking, want)
	}
}

func TestCustomNetworkingMakesNoENIInAnotherZonesSubnet(t *testing.T) {
	w := newPodWorld(t)
	src := &fakeENIConfigs{}
	src.set(subnet.ENIConfig{Name: "wrong", Subnet: podB}, true, "", nil)
	r := w.startCustom(src, newRecordingDriver())
	waitReady(t, r.node)
	statusHas(t, r, "the zone error in the status", customLine, "ENIConfig wrong names subnet "+podB, "us-west-2b", "not the node's zone us-west-2a")
	w.passVirtual(2*time.Minute, nil)
	if n := w.sim.Counters()["CreateNetworkInterface"].Calls; n != 0 {
		t.Fatalf("%d creates with an ENIConfig in another zone, want none", n)
	}
	if n := w.sim.Counters()["DescribeSubnets"].Calls; n > 2 {
		t.Errorf("%d DescribeSubnets in 2 virtual minutes: the ENIConfig's subnet should be read once", n)
	}
	// No ENIConfig at all: no ENI either, and the status says why.
	src.set(subnet.ENIConfig{}, false, "the node's label names ENIConfig us-west-2a, which does not exist", nil)
	statusHas(t, r, "the missing ENIConfig in the status", customLine, "no ENIConfig applies", "does not exist")
	w.passVirtual(time.Minute, nil)
	if n := w.sim.Counters()["CreateNetworkInterface"].Calls; n != 0 {
		t.Fatalf("%d creates without an ENIConfig, want none", n)
	}
	// Fixed: the pool grows in the right subnet after its backoff.
	src.set(subnet.ENIConfig{Name: "us-west-2a", Subnet: podA1}, true, "", nil)
	eventually(t, 30*time.Second, "an ENI in the fixed ENIConfig's subnet", func() error {
		for _, e := range secondaries(r.node.Snapshot()) {
			if e.SubnetID == podA1 && e.State == journal.Ready {
				return nil
			}
		}
		return errors.New("none yet")
	})
}

func TestAChangedENIConfigDrainsTheOldSubnetsENIs(t *testing.T) {
	w := newPodWorld(t)
	src := &fakeENIConfigs{}
	src.set(subnet.ENIConfig{Name: "one", Subnet: podA1}, true, "", nil)
	dp := newRecordingDriver()
	r := w.startCustom(src, dp)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 3)
	old := r.node.Snapshot().Assignment("pod-0", "eth0").ENI
	src.set(subnet.ENIConfig{Name: "two", Subnet: podA2}, true, "", nil)
	// The pool may have grown a second ENI in podA1 before the change (a warm target on a slow machine):
	// every ENI of podA1 drains, and the status counts them.
	eventually(t, 20*time.Second, "the old subnet's ENIs draining", func() error {
		n := 0
		for _, e := range secondaries(r.node.Snapshot()) {
			if e.SubnetID == podA1 {
				n++
			}
		}
		drain := fmt.Sprintf("%d ENIs in %s drain (3 pods)", n, podA1)
		if n == 1 {
			drain = "1 ENI in " + podA1 + " drains (3 pods)"
		}
		got := customLine(r.node.Status())
		for _, want := range []string{"ENIConfig two subnet " + podA2, drain} {
			if !strings.Contains(got, want) {
				return fmt.Errorf("status %q lacks %q", got, want)
			}
		}
		return nil
	})
	// New pods get addresses of a new ENI in podA2 only; the old ENI keeps its pods.
	assignPods(t, r.node, answered, 3, 6)
	st := r.node.Snapshot()
	for i := 3; i < 6; i++ {
		a := st.Assignment(fmt.Sprintf("pod-%d", i), "eth0")
		if e := st.ENIByID(a.ENI); e == nil || e.SubnetID != podA2 {
			t.Fatalf("new pod %s on ENI %s, want one in %s", a.ContainerID, a.ENI, podA2)
		}
	}
	if st.ENIByID(old) == nil {
		t.Fatalf("the old ENI %s went while it held pods", old)
	}
	// The API server goes away: the pool keeps serving, and the status says so.
	src.set(subnet.ENIConfig{Name: "two", Subnet: podA2}, true, "", errAPIDown)
	statusHas(t, r, "the API server error in the status", customLine, "API server is unreachable", "connection refused")
	assignPods(t, r.node, answered, 6, 8)
	// The old ENI's pods go: the surplus path releases it.
	for i := 0; i < 3; i++ {
		releasePod(t, r.node, fmt.Sprintf("pod-%d", i))
		delete(answered, fmt.Sprintf("pod-%d", i))
	}
	eventually(t, 60*time.Second, "the old ENI released", func() error {
		for _, e := range w.sim.Snapshot().ENIs {
			if e.ID == old {
				return fmt.Errorf("ENI %s still exists (%s)", old, e.Status)
			}
		}
		if r.node.Snapshot().ENIByID(old) != nil {
			return errors.New("still in the books")
		}
		return nil
	})
	eventually(t, 20*time.Second, "every ENI at rest in its subnet, up in the datapath", func() error {
		st := r.node.Snapshot()
		return errors.Join(w.checkENISubnets(st, dp), w.checkBooks(st, answered))
	})
	if s := r.node.Status().CustomNetworking; strings.Contains(s, "drains") {
		t.Errorf("status %q still speaks of draining", s)
	}
}

func TestAnUnknownSecurityGroupBacksOffAndTheStatusNamesIt(t *testing.T) {
	w := newPodWorld(t)
	src := &fakeENIConfigs{}
	src.set(subnet.ENIConfig{Name: "typo", Subnet: podA1, SecurityGroups: []string{"sg-0000000000000dead"}}, true, "", nil)
	r := w.startCustom(src, newRecordingDriver())
	waitReady(t, r.node)
	statusHas(t, r, "the refusal in the status", poolLine, "InvalidGroup.NotFound", "sg-0000000000000dead", "backing off")
	w.passVirtual(2*time.Minute, nil)
	// Backoff per code: 5 s doubling, so a handful in two minutes, not one per pool interval (120).
	if n := w.sim.Counters()["CreateNetworkInterface"].Calls; n > 8 {
		t.Fatalf("%d refused creates in 2 virtual minutes, want a backoff", n)
	}
	if n := len(secondaries(r.node.Snapshot())); n != 0 {
		t.Fatalf("%d ENIs with an unknown group", n)
	}
}

func TestAFullSubnetWithNoOtherCandidateBacksThePoolOff(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	if _, err := w.sim.ExhaustSubnet("subnet-1", 0); err != nil {
		t.Fatal(err)
	}
	r := w.startWith(fastConfig(w.dir), controller.Deps{Node: w.podNode(), Datapath: newRecordingDriver()})
	waitReady(t, r.node)
	statusHas(t, r, "the full subnet in the status", poolLine, "subnet subnet-1 has no free addresses (InsufficientFreeAddressesInSubnet)", "backing off")
	w.passVirtual(3*time.Minute, nil)
	c := w.sim.Counters()
	// The pool's backoff starts at a minute: a handful of calls in three minutes, not one per pool interval.
	if n := c["AssignPrivateIpAddresses"].Calls + c["CreateNetworkInterface"].Calls; n > 6 {
		t.Fatalf("%d refused assigns and creates in 3 virtual minutes, want a backoff", n)
	}
	if n := c["DescribeSubnets"].Calls; n > 3 {
		t.Errorf("%d DescribeSubnets in 3 virtual minutes: the candidates are cached", n)
	}
}

// An ENI adopted in a subnet the node never read (its journal lost, custom networking and discovery off since)
// gets its subnet's CIDR from EC2, so the datapath brings it up with the subnet's gateway and its IPs serve.
func TestAnENIAdoptedInAnUnreadSubnetLearnsItsSubnet(t *testing.T) {
	w := newPodWorld(t)
	src := &fakeENIConfigs{}
	src.set(subnet.ENIConfig{Name: "us-west-2a", Subnet: podA2}, true, "", nil)
	first := w.startCustom(src, newRecordingDriver())
	waitReady(t, first.node)
	answered := map[string]string{}
	assignPods(t, first.node, answered, 0, 3)
	eventually(t, 20*time.Second, "every ENI at rest", func() error { return w.checkBooks(first.node.Snapshot(), answered) })
	var inPodA2 []string
	for _, e := range secondaries(first.node.Snapshot()) {
		if e.SubnetID == podA2 && e.Usable() {
			inPodA2 = append(inPodA2, e.ID)
		}
	}
	if len(inPodA2) == 0 {
		t.Fatalf("no ENI in %s to adopt", podA2)
	}
	first.stop()

	cfg := fastConfig(t.TempDir()) // a new journal: the ENIs come back by adoption
	cfg.DisableSubnetDiscovery = true
	dp := newRecordingDriver()
	r := w.startWith(cfg, controller.Deps{Node: w.podNode(), Datapath: dp})
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the ENIs of "+podA2+" adopted", func() error {
		for _, id := range inPodA2 {
			if r.node.Snapshot().ENIByID(id) == nil {
				return fmt.Errorf("ENI %s not in the books", id)
			}
		}
		return nil
	})
	w.waitENISubnets(r, dp)
}
