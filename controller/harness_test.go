package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// world is the shared in-process world of test/simworld (one VPC, subnet and instance, served over HTTP and
// reached through the real SDK) on a scaled clock, with what the controller tests add: a journal directory,
// nodes started in the background, waits in virtual time and the books' check against the simulator.
type world struct {
	t  testing.TB
	sw *simworld.World
	// The parts of sw the tests use, by their short names.
	sim  *ec2sim.Sim
	inst ec2sim.Instance
	clk  *clock.Scaled
	dir  string
}

// newWorld is an itype instance in simworld's default subnet (subnet-1, 10.0.0.0/20, us-west-2a), on a clock
// factor times faster than the wall's.
func newWorld(t testing.TB, itype string, factor float64) *world {
	t.Helper()
	return newWorldIn(t, itype, factor, ec2sim.SubnetSpec{})
}

// newWorldIn is newWorld with the instance in the subnet spec describes (its zero fields are the default
// subnet's).
func newWorldIn(t testing.TB, itype string, factor float64, subnet ec2sim.SubnetSpec) *world {
	t.Helper()
	if factor == 0 {
		t.Fatal("the controller tests' world runs on a scaled clock: give it a factor")
	}
	return newWorldWith(t, simworld.Options{Type: itype, Factor: factor, Subnet: subnet})
}

// newWorldWith is newWorld with the simworld options o (o.Factor must be set).
func newWorldWith(t testing.TB, o simworld.Options) *world {
	t.Helper()
	if o.Factor == 0 {
		t.Fatal("the controller tests' world runs on a scaled clock: give it a factor")
	}
	sw := simworld.New(t, o)
	return &world{t: t, sw: sw, sim: sw.Sim, inst: sw.Instance, clk: sw.Clock.(*clock.Scaled), dir: t.TempDir()}
}

// ec2 returns the real SDK client against the simulator, wrapped by the rate-limiting client, over a plain HTTP
// client with a 10 s limit per call.
func (w *world) ec2(reg prometheus.Registerer) ec2client.EC2API {
	return w.ec2With(reg, &http.Client{Timeout: 10 * time.Second})
}

// ec2With is ec2 over the given HTTP client.
func (w *world) ec2With(reg prometheus.Registerer, hc *http.Client) ec2client.EC2API {
	return w.sw.EC2With(w.t, simworld.EC2Options{HTTPClient: hc, Metrics: reg})
}

func (w *world) nodeInfo() metadata.Node { return w.sw.NodeInfo() }

// fastConfig runs every loop quickly in virtual time.
func fastConfig(dir string) controller.Config {
	return controller.Config{StateDir: dir, Cluster: "test", PoolInterval: time.Second, ReconcileInterval: 30 * time.Second,
		ReleaseDelay: 5 * time.Second, Cooldown: 10 * time.Second, GCGrace: 20 * time.Second}
}

// running is a started node controller.
type running struct {
	node   *controller.Node
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *world) start(cfg controller.Config, api ec2client.EC2API, wrap func(controller.Journal) controller.Journal) *running {
	w.t.Helper()
	return w.startWith(cfg, controller.Deps{EC2: api, WrapJournal: wrap})
}

// startWith starts a controller built from deps, whose EC2 client, instance, clock and logger default to the
// world's.
func (w *world) startWith(cfg controller.Config, deps controller.Deps) *running {
	w.t.Helper()
	if deps.EC2 == nil {
		deps.EC2 = w.ec2(nil)
	}
	node := w.sw.NewNodeWith(w.t, cfg, deps)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{node: node, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = node.Run(ctx) }()
	w.t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.node.Close()
}

// eventually polls cond until it holds or the wall deadline passes.
func eventually(t testing.TB, wall time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(wall)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// passVirtual waits until d of the world's virtual time has passed, checking hold (may be nil) all along:
// hold fails the test itself when what must hold meanwhile does not.
func (w *world) passVirtual(d time.Duration, hold func()) {
	w.t.Helper()
	start := w.clk.Now()
	eventually(w.t, time.Duration(float64(d)/w.clk.Factor())+20*time.Second, fmt.Sprintf("%s of virtual time", d), func() error {
		if hold != nil {
			hold()
		}
		if w.clk.Since(start) < d {
			return fmt.Errorf("%s passed", w.clk.Since(start).Round(time.Second))
		}
		return nil
	})
}

// readySecondaries counts the books' non-primary ENIs in state ready.
func readySecondaries(st *journal.State) int {
	n := 0
	for _, e := range st.ENIs {
		if !e.Primary && e.State == journal.Ready {
			n++
		}
	}
	return n
}

func waitReady(t testing.TB, n *controller.Node) {
	eventually(t, 20*time.Second, "controller ready", func() error {
		if ok, why := n.Ready(); !ok {
			return errors.New(why)
		}
		return nil
	})
}

// testNetnsDir holds the network namespaces the tests' pods name: a directory that does not exist, so the
// node cannot tell whether they are gone and never releases their assignments as vanished.
const testNetnsDir = "/nonexistent/eniwire-test/netns/"

// assignRetrying asks until the pool has an IP (the CNI plugin's retry).
func assignRetrying(t testing.TB, n *controller.Node, cid string) *api.Assignment {
	t.Helper()
	var out *api.Assignment
	eventually(t, 30*time.Second, "assigning "+cid, func() error {
		a, err := n.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}, Netns: testNetnsDir + cid})
		out = a
		return err
	})
	return out
}

// checkBooks asserts the promise against the simulator: no leaked ENI, no duplicate ENI, no IP assigned twice,
// no assignment lost, every assigned IP held by its ENI in EC2.
func (w *world) checkBooks(st *journal.State, answered map[string]string) error {
	snap := w.sim.Snapshot()
	books := map[string]journal.ENI{}
	for _, e := range st.ENIs {
		if e.ID == "" {
			continue
		}
		if _, dup := books[e.ID]; dup {
			return fmt.Errorf("ENI %s twice in the books", e.ID)
		}
		books[e.ID] = e
	}
	ops := map[string]string{}
	simIPs := map[string][]string{}
	simIPv6 := map[string][]string{}
	for _, e := range snap.ENIs {
		simIPs[e.ID] = e.IPs
		for _, p := range e.Prefixes {
			simIPs[e.ID] = append(simIPs[e.ID], journal.Addresses(p)...)
		}
		simIPv6[e.ID] = e.IPv6Prefixes
		if b, ok := books[e.ID]; ok && !sameSet(b.IPv6Prefixes, e.IPv6Prefixes) {
			return fmt.Errorf("ENI %s holds the IPv6 prefixes %v in EC2, %v in the books", e.ID, e.IPv6Prefixes, b.IPv6Prefixes)
		}
		if e.Tags[eni.TagOwner] != w.inst.ID {
			continue
		}
		if other, dup := ops[e.Tags[eni.TagOpID]]; dup {
			return fmt.Errorf("duplicate ENIs %s and %s for op %s", other, e.ID, e.Tags[eni.TagOpID])
		}
		ops[e.Tags[eni.TagOpID]] = e.ID
		b, inBooks := books[e.ID]
		switch {
		case e.Attachment != nil && e.Attachment.InstanceID == w.inst.ID && (!inBooks || !b.Usable()):
			return fmt.Errorf("leaked ENI %s: attached but not usable in the books (%v)", e.ID, b.State)
		case e.Attachment == nil && !inBooks:
			return fmt.Errorf("leaked ENI %s: available and owned by nobody", e.ID)
		case e.Attachment != nil && e.Attachment.InstanceID == w.inst.ID && !e.Attachment.DeleteOnTermination:
			return fmt.Errorf("ENI %s attached without DeleteOnTermination", e.ID)
		}
	}
	for id, b := range books {
		if _, ok := simIPs[id]; !ok {
			return fmt.Errorf("books ENI %s (%s) does not exist in EC2", id, b.State)
		}
		if !b.Usable() {
			return fmt.Errorf("ENI %s not at rest: %s %s", id, b.State, b.ReleaseStep)
		}
	}
	if len(st.IPOps) > 0 {
		return fmt.Errorf("%d IP operations pending", len(st.IPOps))
	}
	ips := map[string]string{}
	for _, a := range st.Assignments {
		if other, dup := ips[a.IP]; dup {
			return fmt.Errorf("IP %s assigned twice: %s and %s", a.IP, other, a.ContainerID)
		}
		ips[a.IP] = a.ContainerID
		if !slices.Contains(simIPs[a.ENI], a.IP) && !inIPv6Prefix(simIPv6[a.ENI], a.IP) {
			return fmt.Errorf("assigned IP %s is not on ENI %s in EC2", a.IP, a.ENI)
		}
		if a.IPv6 == "" {
			continue
		}
		if other, dup := ips[a.IPv6]; dup {
			return fmt.Errorf("IP %s assigned twice: %s and %s", a.IPv6, other, a.ContainerID)
		}
		ips[a.IPv6] = a.ContainerID
		if !inIPv6Prefix(simIPv6[w.inst.PrimaryENI], a.IPv6) {
			return fmt.Errorf("assigned IPv6 %s is not in the primary ENI's /80 in EC2", a.IPv6)
		}
	}
	for cid, ip := range answered {
		a := st.Assignment(cid, "eth0")
		if a == nil || dualAddrs(a.IP, a.IPv6) != ip {
			return fmt.Errorf("assignment of %s (%s) lost", cid, ip)
		}
	}
	return nil
}

// dualAddrs is how the tests note a pod's addresses: its IP, and a dual-stack pod's IPv6 after a space.
func dualAddrs(ip, ipv6 string) string {
	if ipv6 == "" {
		return ip
	}
	return ip + " " + ipv6
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// inIPv6Prefix reports whether ip lies in one of the prefixes.
func inIPv6Prefix(prefixes []string, ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(prefixes, func(s string) bool {
		p, err := netip.ParsePrefix(s)
		return err == nil && p.Contains(a)
	})
}

// errCrashed is what every call returns once a simulated crash has happened.
var errCrashed = errors.New("simulated crash")

// crash counts journal writes and mutating EC2 calls and "kills" the controller at the Nth: the write or call
// takes effect, its result is never seen, and nothing after it reaches the journal or EC2.
type crash struct {
	at     int64
	n      atomic.Int64
	dead   atomic.Bool
	mu     sync.Mutex
	points []string
}

func (c *crash) hit(point string) bool {
	if c.dead.Load() {
		return true
	}
	n := c.n.Add(1)
	c.mu.Lock()
	c.points = append(c.points, point)
	c.mu.Unlock()
	if n == c.at {
		c.dead.Store(true)
		return true
	}
	return false
}

// crashJournal is the node's journal with a crash point at each write. The write takes effect (as with
// kill -9, the kernel has the bytes); from the crash on, every call fails.
type crashJournal struct {
	inner controller.Journal
	c     *crash
}

func (j crashJournal) Append(st *journal.State) (uint64, error) {
	if j.c.dead.Load() {
		return 0, errCrashed
	}
	seq, err := j.inner.Append(st)
	if err != nil {
		return 0, err
	}
	if j.c.hit("journal") {
		return 0, errCrashed
	}
	return seq, nil
}

func (j crashJournal) Commit(seq uint64, d journal.Durability) error {
	if j.c.dead.Load() {
		return errCrashed
	}
	return j.inner.Commit(seq, d)
}

type crashEC2 struct {
	ec2client.EC2API
	c *crash
}

func call[I, O any](c *crash, name string, f func(context.Context, I, ...func(*ec2.Options)) (O, error), ctx context.Context, in I) (O, error) {
	var zero O
	if c.dead.Load() {
		return zero, errCrashed
	}
	out, err := f(ctx, in)
	if c.hit(name) {
		return zero, errCrashed
	}
	return out, err
}

func (e crashEC2) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	return call(e.c, "create", e.EC2API.CreateNetworkInterface, ctx, in)
}
func (e crashEC2) AttachNetworkInterface(ctx context.Context, in *ec2.AttachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error) {
	return call(e.c, "attach", e.EC2API.AttachNetworkInterface, ctx, in)
}
func (e crashEC2) ModifyNetworkInterfaceAttribute(ctx context.Context, in *ec2.ModifyNetworkInterfaceAttributeInput, _ ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
	return call(e.c, "modify", e.EC2API.ModifyNetworkInterfaceAttribute, ctx, in)
}
func (e crashEC2) DetachNetworkInterface(ctx context.Context, in *ec2.DetachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error) {
	return call(e.c, "detach", e.EC2API.DetachNetworkInterface, ctx, in)
}
func (e crashEC2) DeleteNetworkInterface(ctx context.Context, in *ec2.DeleteNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error) {
	return call(e.c, "delete", e.EC2API.DeleteNetworkInterface, ctx, in)
}
func (e crashEC2) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	return call(e.c, "assign-ips", e.EC2API.AssignPrivateIpAddresses, ctx, in)
}
func (e crashEC2) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	return call(e.c, "unassign-ips", e.EC2API.UnassignPrivateIpAddresses, ctx, in)
}
func (e crashEC2) AssignIpv6Addresses(ctx context.Context, in *ec2.AssignIpv6AddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignIpv6AddressesOutput, error) {
	return call(e.c, "assign-ipv6", e.EC2API.AssignIpv6Addresses, ctx, in)
}
func (e crashEC2) UnassignIpv6Addresses(ctx context.Context, in *ec2.UnassignIpv6AddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignIpv6AddressesOutput, error) {
	return call(e.c, "unassign-ipv6", e.EC2API.UnassignIpv6Addresses, ctx, in)
}
func (e crashEC2) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, o ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	if e.c.dead.Load() {
		return nil, errCrashed
	}
	return e.EC2API.DescribeNetworkInterfaces(ctx, in, o...)
}
