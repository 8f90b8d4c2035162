package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/ec2sim"
)

func prefixConfig(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.EnablePrefixDelegation = true
	return cfg
}

// slotsOf returns the prefixes and the single IPs the books hold on the usable ENIs.
func slotsOf(st *journal.State) (prefixes, singles []string) {
	for _, e := range st.ENIs {
		if e.Usable() {
			ips, ps := journal.SplitSlots(e.IPs)
			prefixes, singles = append(prefixes, ps...), append(singles, ips...)
		}
	}
	return prefixes, singles
}

// assignPods assigns pod-from to pod-(to-1), retrying until the pool has IPs, and notes the answers.
func assignPods(t *testing.T, n *controller.Node, answered map[string]string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		cid := fmt.Sprintf("pod-%d", i)
		answered[cid] = assignRetrying(t, n, cid).IP
	}
}

func releasePod(t testing.TB, n *controller.Node, cid string) {
	t.Helper()
	if _, err := n.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}}); err != nil {
		t.Fatalf("releasing %s: %v", cid, err)
	}
}

func TestPrefixModePacksPodsIntoPrefixesAndReleasesTheEmptyOnes(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 20)
	st := r.node.Snapshot()
	prefixes, singles := slotsOf(st)
	if len(singles) != 0 || len(prefixes) < 2 {
		t.Fatalf("books hold prefixes %v and single IPs %v, want only prefixes (at least 2 for 20 pods)", prefixes, singles)
	}
	// Dense: the first 16 pods share one prefix, the next 4 another.
	byPrefix := map[string]int{}
	for _, ip := range answered {
		for _, p := range prefixes {
			if journal.Covers(p, ip) {
				byPrefix[p]++
			}
		}
	}
	counts := slices.Sorted(func(yield func(int) bool) {
		for _, n := range byPrefix {
			if !yield(n) {
				return
			}
		}
	})
	if !slices.Equal(counts, []int{4, 16}) {
		t.Errorf("pods per prefix = %v, want [4 16] (the fullest prefix filled first)", counts)
	}
	w.settle(r, answered, 16)
	var shown []int
	for _, e := range r.node.Status().ENIs {
		for _, p := range e.Prefixes {
			if p.Assigned > 0 {
				shown = append(shown, p.Assigned)
			}
		}
	}
	if slices.Sort(shown); !slices.Equal(shown, []int{4, 16}) {
		t.Errorf("status shows pods per prefix %v, want [4 16]", shown)
	}
	c := w.sim.Counters()
	if n := c["AssignPrivateIpAddresses"].Calls; n > 3 {
		t.Errorf("AssignPrivateIpAddresses called %d times for 20 pods, want at most 3", n)
	}
	// The pods go: after the cooldown and the release delay only WARM_PREFIX_TARGET=1 prefix stays.
	for cid := range answered {
		releasePod(t, r.node, cid)
	}
	eventually(t, 30*time.Second, "empty prefixes released", func() error {
		prefixes, _ := slotsOf(r.node.Snapshot())
		if len(prefixes) != 1 {
			return fmt.Errorf("books hold prefixes %v, want 1", prefixes)
		}
		for _, e := range w.sim.Snapshot().ENIs {
			if e.ID == w.inst.PrimaryENI && len(e.Prefixes) != 1 {
				return fmt.Errorf("EC2 shows prefixes %v on the primary ENI, want 1", e.Prefixes)
			}
		}
		return w.checkBooks(r.node.Snapshot(), nil)
	})
	if n := w.sim.Counters()["UnassignPrivateIpAddresses"].Calls; n == 0 {
		t.Error("no UnassignPrivateIpAddresses: the prefixes left the books but not EC2")
	}
}

// settle waits until the pool is at rest: no ENI operation unfinished, at least warm IPs warm, and the books
// keep every promise (checkBooks).
func (w *world) settle(r *running, answered map[string]string, warm int) {
	w.t.Helper()
	eventually(w.t, 20*time.Second, "pool at rest", func() error {
		st := r.node.Snapshot()
		for _, e := range st.ENIs {
			if !e.Usable() {
				return fmt.Errorf("ENI op %s is %s", e.OpID, e.State)
			}
		}
		if n := r.node.Status().Warm; n < warm {
			return fmt.Errorf("%d warm IPs, want %d", n, warm)
		}
		return w.checkBooks(st, answered)
	})
}

// fragmentSubnet plays a legacy node: ENIs in the world's subnet holding n single IPs in all, scattered over
// the subnet as EC2 does, so that no aligned /28 stays free. It returns the ENIs.
func (w *world) fragmentSubnet(n int) []string {
	w.t.Helper()
	return w.fragment(w.inst.SubnetID, n)
}

// fragment is fragmentSubnet for the subnet subnetID.
func (w *world) fragment(subnetID string, n int) []string {
	w.t.Helper()
	api := w.ec2(nil)
	var out []string
	for n > 0 {
		k := min(n, 39)
		n -= k
		res, err := api.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetID),
			SecondaryPrivateIpAddressCount: aws.Int32(int32(k))})
		if err != nil {
			w.t.Fatalf("fragmenting the subnet: %v", err)
		}
		out = append(out, aws.ToString(res.NetworkInterface.NetworkInterfaceId))
	}
	return out
}

func TestFragmentedSubnetFallsBackToSingleIPsAndReturnsToPrefixes(t *testing.T) {
	w := newWorldIn(t, "m5.large", 200, ec2sim.SubnetSpec{ID: "subnet-1", VPCID: "vpc-1", CIDR: "10.0.64.0/24", AZ: "us-west-2a", Scatter: true})
	legacy := w.fragmentSubnet(120)
	reg := prometheus.NewRegistry()
	r := w.startWith(prefixConfig(w.dir), controller.Deps{Registerer: reg})
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 2)
	prefixes, singles := slotsOf(r.node.Snapshot())
	if len(prefixes) != 0 || len(singles) == 0 {
		t.Fatalf("books hold prefixes %v and single IPs %v, want single IPs only", prefixes, singles)
	}
	if c := w.sim.Counters()["AssignPrivateIpAddresses"].Errors["InsufficientCidrBlocks"]; c == 0 {
		t.Fatal("EC2 never refused a prefix: the subnet is not fragmented, the test tested nothing")
	}
	if s := r.node.Status().PrefixFallback; !strings.Contains(s, "InsufficientCidrBlocks") || !strings.Contains(s, "reservation") {
		t.Errorf("status prefix fallback line = %q, want the cause and the fix", s)
	}
	if v := gaugeValue(t, reg, "eniwire_prefix_fallback"); v != 1 {
		t.Errorf("eniwire_prefix_fallback = %v, want 1", v)
	}

	// Prefixes are tried again once the retry time has passed, then not until twice as long has.
	refusals := func() int64 {
		c := w.sim.Counters()
		return c["AssignPrivateIpAddresses"].Errors["InsufficientCidrBlocks"] + c["CreateNetworkInterface"].Errors["InsufficientCidrBlocks"]
	}
	grow := func(from, to int) {
		assignPods(t, r.node, answered, from, to)
		w.settle(r, answered, 16)
	}
	before := refusals()
	w.passVirtual(90*time.Second, nil)
	grow(2, 5)
	if got := refusals(); got != before+1 {
		t.Fatalf("after the first retry time EC2 saw %d more prefix requests, want 1", got-before)
	}
	w.passVirtual(60*time.Second, nil)
	grow(5, 8)
	if got := refusals(); got != before+1 {
		t.Fatalf("within the doubled retry time EC2 saw %d more prefix requests, want none", got-before-1)
	}

	// The legacy node goes: /28s are free again, and the next room after the retry time is a prefix.
	w.deleteENIs(legacy)
	w.passVirtual(3*time.Minute, nil)
	grow(8, 20)
	eventually(t, 20*time.Second, "prefixes again", func() error {
		prefixes, singles := slotsOf(r.node.Snapshot())
		if len(prefixes) == 0 || len(singles) == 0 {
			return fmt.Errorf("books hold prefixes %v and single IPs %v, want both (mixed ENIs)", prefixes, singles)
		}
		if s := r.node.Status().PrefixFallback; s != "" {
			return fmt.Errorf("status still says %q", s)
		}
		return nil
	})
	if v := gaugeValue(t, reg, "eniwire_prefix_fallback"); v != 0 {
		t.Errorf("eniwire_prefix_fallback = %v, want 0", v)
	}
	eventually(t, 20*time.Second, "books at rest", func() error { return w.checkBooks(r.node.Snapshot(), answered) })
}

// gaugeValue reads an unlabelled gauge from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func TestTurningPrefixModeOnAndOffKeepsPodsAndMixesSlots(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	answered := map[string]string{}
	assign := func(r *running, from, to int) { assignPods(t, r.node, answered, from, to) }
	// Secondary-IP mode: the pods get single IPs.
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	assign(r, 0, 8)
	w.settle(r, answered, 9)
	r.stop()

	// Upgrade: the pods' single IPs stay, the new room comes as prefixes.
	r = w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	assign(r, 8, 30)
	w.settle(r, answered, 16)
	prefixes, singles := slotsOf(r.node.Snapshot())
	if len(prefixes) == 0 {
		t.Fatal("no prefix after turning prefix mode on")
	}
	for i := range 8 {
		if ip := answered[fmt.Sprintf("pod-%d", i)]; !slices.Contains(singles, ip) {
			t.Errorf("pod-%d's single IP %s left the books on the upgrade", i, ip)
		}
	}
	if !r.node.Status().PrefixDelegation {
		t.Error("status does not say prefix delegation is on")
	}
	r.stop()

	// Downgrade: prefixes stay while pods hold their IPs; once the pods on them go, they go back.
	r = w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	if err := w.checkBooks(r.node.Snapshot(), answered); err != nil {
		t.Fatalf("after the downgrade: %v", err)
	}
	for i := 8; i < 30; i++ {
		cid := fmt.Sprintf("pod-%d", i)
		releasePod(t, r.node, cid)
		delete(answered, cid)
	}
	eventually(t, 30*time.Second, "prefixes released after the downgrade", func() error {
		prefixes, _ := slotsOf(r.node.Snapshot())
		if len(prefixes) != 0 {
			return fmt.Errorf("books still hold prefixes %v", prefixes)
		}
		for _, e := range w.sim.Snapshot().ENIs {
			if len(e.Prefixes) > 0 {
				return fmt.Errorf("EC2 still shows prefixes %v on %s", e.Prefixes, e.ID)
			}
		}
		return nil
	})
	w.settle(r, answered, 9)
}

func TestNewENIInPrefixModeIsCreatedWithItsPrefix(t *testing.T) {
	// A t3.micro ENI has one IPv4 slot for pods: the 17th pod needs a second ENI.
	w := newWorld(t, "t3.micro", 200)
	r := w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 17)
	w.settle(r, answered, 15)
	for _, e := range w.sim.Snapshot().ENIs {
		if len(e.Prefixes) != 1 || len(e.IPs) != 1 {
			t.Errorf("ENI %s holds prefixes %v and addresses %v, want one prefix beside its primary address", e.ID, e.Prefixes, e.IPs)
		}
	}
	c := w.sim.Counters()
	if n := c["AssignPrivateIpAddresses"].Calls; n != 1 {
		t.Errorf("AssignPrivateIpAddresses called %d times, want 1 (the primary's prefix; the new ENI's comes with its create)", n)
	}
	for _, action := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute"} {
		if c[action].Calls != 1 {
			t.Errorf("%s called %d times, want 1", action, c[action].Calls)
		}
	}
}

func TestThePoolHoldsNoMoreIPsThanKubeletsMaxPods(t *testing.T) {
	for _, c := range []struct {
		name     string
		prefixes bool
		maxPods  int
		holds    int // the most IPs: max pods, rounded up to a whole prefix in prefix mode
	}{
		{"secondary IPs on an m5.large: 29", false, 29, 27},
		{"prefixes on an m5.large: kubelet's ceiling of 110", true, 110, 112},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "m5.large", 200)
			reg := prometheus.NewRegistry()
			cfg := fastConfig(w.dir)
			cfg.EnablePrefixDelegation = c.prefixes
			cfg.MinimumIPTarget = 500
			r := w.startWith(cfg, controller.Deps{Registerer: reg})
			waitReady(t, r.node)
			w.settle(r, nil, c.holds)
			w.passVirtual(time.Minute, func() {
				if s := r.node.Status(); s.Warm+s.Assigned+s.Cooldown > c.holds {
					t.Fatalf("the pool holds %d IPs, want at most %d", s.Warm+s.Assigned+s.Cooldown, c.holds)
				}
			})
			if s := r.node.Status(); s.MaxPods != c.maxPods {
				t.Errorf("status max pods = %d, want %d", s.MaxPods, c.maxPods)
			}
			if v := gaugeValue(t, reg, "eniwire_max_pods"); v != float64(c.maxPods) {
				t.Errorf("eniwire_max_pods = %v, want %d", v, c.maxPods)
			}
		})
	}
}

func TestAXenTypeAskedForPrefixesKeepsSecondaryIPs(t *testing.T) {
	w := newWorld(t, "m4.large", 200)
	r := w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 4)
	w.settle(r, answered, 1)
	if prefixes, singles := slotsOf(r.node.Snapshot()); len(prefixes) != 0 || len(singles) < 4 {
		t.Fatalf("books hold prefixes %v and single IPs %v, want single IPs only", prefixes, singles)
	}
	if s := r.node.Status(); s.PrefixDelegation || s.MaxPods != 20 {
		t.Errorf("status says prefix delegation %v, max pods %d; want false, 20 (2 ENIs x 9 + 2)", s.PrefixDelegation, s.MaxPods)
	}
	if n := w.sim.Counters()["AssignPrivateIpAddresses"].Errors["InvalidParameterValue"]; n != 0 {
		t.Errorf("EC2 refused %d assigns: the node asked a Xen type for prefixes", n)
	}
}

// TestAPrefixUnassignedOutsideEniwireLeavesTheBooks: the reconcile compares the books' prefixes with EC2's as
// it does single IPs. A free prefix that EC2 no longer lists leaves the books and a new one takes its place.
func TestAPrefixUnassignedOutsideEniwireLeavesTheBooks(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(prefixConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	answered := map[string]string{}
	assignPods(t, r.node, answered, 0, 20)
	w.settle(r, answered, 16)
	st := r.node.Snapshot()
	prim := primaryID(st)
	prefixes, _ := slotsOf(st)
	var free string
	for _, p := range prefixes {
		held := false
		for _, ip := range answered {
			held = held || journal.Covers(p, ip)
		}
		if !held {
			free = p
		}
	}
	if free == "" {
		t.Fatalf("no free prefix among %v", prefixes)
	}
	outsider := w.ec2(nil)
	assignsBefore := w.sim.Counters()["AssignPrivateIpAddresses"].Calls
	if _, err := outsider.UnassignPrivateIpAddresses(context.Background(), &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(prim), Ipv4Prefixes: []string{free}}); err != nil {
		t.Fatal(err)
	}
	// The node at rest asks for a prefix only once the free one has left its books (its warm prefix is gone),
	// and EC2 may hand the same /28 back at once: a new assign is as good a witness as the gap itself, which a
	// poll can miss on a loaded machine.
	eventually(t, 10*time.Second, "the prefix EC2 no longer lists leaves the books", func() error {
		if w.sim.Counters()["AssignPrivateIpAddresses"].Calls > assignsBefore {
			return nil
		}
		if eni, ok := booksIPs(r.node.Snapshot())[free]; ok {
			return fmt.Errorf("%s still in the books on %s, and the node asked for no new prefix", free, eni)
		}
		return nil
	})
	w.settle(r, answered, 16)
	// More pods: every address they get is held by its ENI in EC2 (settle's checkBooks), the prefix EC2 may
	// hand out again included.
	assignPods(t, r.node, answered, 20, 36)
	w.settle(r, answered, 16)
}
