package eni_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// books is the controller's side of the Manager in these tests: the state under a lock, saved to a real
// journal on every change, as the node controller does.
type books struct {
	mu    sync.Mutex
	st    *journal.State
	store *journal.Store
}

func (b *books) Update(_ context.Context, fn func(st *journal.State) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	before := b.st.Clone()
	if err := fn(b.st); err != nil {
		*b.st = *before
		return err
	}
	return b.store.Save(b.st)
}

func (b *books) View(fn func(st *journal.State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
}

// rig is one instance in a simulated VPC, reached through the real SDK over HTTP, and a Manager for it.
type rig struct {
	sim   *ec2sim.Sim
	inst  ec2sim.Instance
	clk   clock.Clock
	books *books
	dir   string
	api   *ec2.Client
	m     *eni.Manager
}

func newRig(t *testing.T, itype string) *rig {
	t.Helper()
	w := simworld.New(t, simworld.Options{Type: itype, Factor: 1000, NoThrottling: true})
	sim, inst, clk, srv := w.Sim, w.Instance, w.Clock, w.Server
	// No SDK retries: each Advance is exactly the calls the commit makes.
	api := srv.EC2Client(t, func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
	dir := t.TempDir()
	store, st, err := journal.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b := &books{st: st, store: store}
	it, _ := ec2sim.LookupInstanceType(itype)
	m := eni.NewManager(eni.Config{InstanceID: inst.ID, Cluster: "test", SubnetID: inst.SubnetID, SubnetCIDR: inst.SubnetCIDR,
		SecurityGroups: inst.SecurityGroups, MaxENIs: it.MaxENIs}, api, nil, b, clk, slog.New(slog.DiscardHandler))
	return &rig{sim: sim, inst: inst, clk: clk, books: b, dir: dir, api: api, m: m}
}

// onDisk is the record of op as the journal file holds it: what a restart would see.
func (r *rig) onDisk(t *testing.T, op string) *journal.ENI {
	t.Helper()
	st, _, err := journal.Read(r.books.store.Path())
	if err != nil {
		t.Fatal(err)
	}
	return st.ENIByOp(op)
}

func (r *rig) calls(action string) int { return int(r.sim.Counters()[action].Calls) }

// ready drives a new ENI with ips secondary IPs to ready and returns its op.
func (r *rig) ready(t *testing.T, ips int) (string, journal.ENI) {
	t.Helper()
	ctx := context.Background()
	op, err := r.m.Plan(ctx, ips, eni.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.m.Advance(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := r.m.Record(op)
	if rec.State != journal.Ready {
		t.Fatalf("after three steps the ENI is %s, want ready", rec.State)
	}
	return op, rec
}

func TestEachCommitStepIsJournaledAndLeavesItsState(t *testing.T) {
	r := newRig(t, "m5.large")
	ctx := context.Background()
	op, err := r.m.Plan(ctx, 4, eni.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.onDisk(t, op); rec == nil || rec.State != journal.Planned || rec.ClientToken != eni.ClientToken(op) || rec.WantIPs != 4 {
		t.Fatalf("planned record on disk = %+v", rec)
	}
	if n := r.calls("CreateNetworkInterface"); n != 0 {
		t.Fatalf("planning made %d creates", n)
	}
	for _, step := range []struct {
		name  string
		want  journal.ENIState
		check func(t *testing.T, rec *journal.ENI, sim ec2sim.ENIState)
	}{
		{"the create brings the ENI with our tags and its secondary IPs", journal.Created, func(t *testing.T, rec *journal.ENI, sim ec2sim.ENIState) {
			if sim.Tags[eni.TagOwner] != r.inst.ID || sim.Tags[eni.TagOpID] != op || len(sim.IPs) != 5 || len(rec.IPs) != 4 {
				t.Fatalf("created ENI: tags %v, %d addresses in EC2, %d secondary in the books", sim.Tags, len(sim.IPs), len(rec.IPs))
			}
			if sim.Attachment != nil {
				t.Fatal("a created ENI is already attached")
			}
		}},
		{"the attach uses the first free device index", journal.Attached, func(t *testing.T, rec *journal.ENI, sim ec2sim.ENIState) {
			if sim.Attachment == nil || sim.Attachment.InstanceID != r.inst.ID || rec.DeviceIndex != 1 || rec.AttachmentID != sim.Attachment.ID {
				t.Fatalf("attached ENI: EC2 %+v, books index %d attachment %s", sim.Attachment, rec.DeviceIndex, rec.AttachmentID)
			}
			if sim.Attachment.DeleteOnTermination {
				t.Fatal("DeleteOnTermination set before the modify")
			}
		}},
		{"the modify sets DeleteOnTermination", journal.Ready, func(t *testing.T, rec *journal.ENI, sim ec2sim.ENIState) {
			if !sim.Attachment.DeleteOnTermination || !rec.DeleteOnTermination {
				t.Fatalf("ready ENI: EC2 %v, books %v", sim.Attachment.DeleteOnTermination, rec.DeleteOnTermination)
			}
		}},
	} {
		t.Run(step.name, func(t *testing.T) {
			if err := r.m.Advance(ctx, op); err != nil {
				t.Fatal(err)
			}
			rec := r.onDisk(t, op)
			if rec == nil || rec.State != step.want {
				t.Fatalf("record on disk = %+v, want state %s", rec, step.want)
			}
			sim, ok := r.sim.ENI(rec.ID)
			if !ok {
				t.Fatalf("ENI %s not in EC2", rec.ID)
			}
			step.check(t, rec, sim)
		})
	}
}

func TestLostCreateAnswerIsReplayedWithTheSameToken(t *testing.T) {
	r := newRig(t, "m5.large")
	ctx := context.Background()
	op, err := r.m.Plan(ctx, 2, eni.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	r.sim.Faults().DropResponses("CreateNetworkInterface", 1)
	if err := r.m.Advance(ctx, op); err == nil {
		t.Fatal("a create whose answer was lost reported success")
	}
	if rec, _ := r.m.Record(op); rec.State != journal.Planned {
		t.Fatalf("after a lost answer the record is %s, want planned", rec.State)
	}
	if err := r.m.Advance(ctx, op); err != nil {
		t.Fatal(err)
	}
	rec, _ := r.m.Record(op)
	var mine []string
	for _, e := range r.sim.Snapshot().ENIs {
		if e.Tags[eni.TagOpID] == op {
			mine = append(mine, e.ID)
		}
	}
	if rec.State != journal.Created || len(mine) != 1 || mine[0] != rec.ID {
		t.Fatalf("books %s %s, EC2 ENIs of the op %v: want one ENI, the books'", rec.State, rec.ID, mine)
	}
}

func TestAttachmentLimitExceededWaitsForAReconcileInsteadOfLooping(t *testing.T) {
	r := newRig(t, "m5.large")
	ctx := context.Background()
	op, err := r.m.Plan(ctx, 2, eni.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.m.Advance(ctx, op); err != nil {
		t.Fatal(err)
	}
	// Someone else fills the instance's two free slots behind the books' back.
	for idx := int32(1); idx <= 2; idx++ {
		out, err := r.api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(r.inst.SubnetID)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(r.inst.ID),
			NetworkInterfaceId: out.NetworkInterface.NetworkInterfaceId, DeviceIndex: aws.Int32(idx)})
		if err != nil {
			t.Fatal(err)
		}
	}
	attaches := r.calls("AttachNetworkInterface")
	err = r.m.Advance(ctx, op)
	if !errors.Is(err, ec2client.ErrBooksWrong) || !r.m.NeedsReconcile() {
		t.Fatalf("attach error %v, needs reconcile %v: want ErrBooksWrong and a reconcile asked for", err, r.m.NeedsReconcile())
	}
	for range 3 {
		if err := r.m.Advance(ctx, op); !errors.Is(err, ec2client.ErrBooksWrong) {
			t.Fatalf("attach before the reconcile = %v, want ErrBooksWrong", err)
		}
	}
	if n := r.calls("AttachNetworkInterface") - attaches; n != 1 {
		t.Fatalf("%d attach calls before the reconcile, want 1", n)
	}
	rep, err := r.m.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.m.NeedsReconcile() || len(rep.Foreign) != 2 {
		t.Fatalf("after the reconcile: needs another %v, foreign ENIs %v", r.m.NeedsReconcile(), rep.Foreign)
	}
	// The reconcile showed no free slot: the unattached ENI is deleted, not attached again, and the caller
	// hears why (ErrNoDeviceIndex), so that it pauses its creates.
	if err := r.m.Advance(ctx, op); !errors.Is(err, eni.ErrNoDeviceIndex) {
		t.Fatalf("attach with no free slot = %v, want ErrNoDeviceIndex", err)
	}
	if err := r.m.Advance(ctx, op); err != nil {
		t.Fatal(err)
	}
	if n := r.calls("AttachNetworkInterface") - attaches; n != 1 {
		t.Fatalf("%d attach calls in all, want 1", n)
	}
	if rec, ok := r.m.Record(op); ok {
		t.Fatalf("the ENI that found no slot is still in the books: %s/%s", rec.State, rec.ReleaseStep)
	}
}

func TestDeleteOfAnENIInUseReadoptsIt(t *testing.T) {
	r := newRig(t, "m5.large")
	ctx := context.Background()
	op, rec := r.ready(t, 2)
	// The journal says delete (a crash after a detach whose effect was undone, say) while EC2 still shows
	// the ENI attached: Delete answers "is currently in use".
	err := r.books.Update(ctx, func(st *journal.State) error {
		e := st.ENIByOp(op)
		e.State, e.ReleaseStep = journal.Releasing, journal.StepDelete
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.m.Advance(ctx, op); err != nil {
		t.Fatal(err)
	}
	got := r.onDisk(t, op)
	if got == nil || !got.Usable() || got.ID != rec.ID {
		t.Fatalf("after an in-use delete the record on disk is %+v, want the ENI usable again", got)
	}
	if sim, ok := r.sim.ENI(rec.ID); !ok || sim.Attachment == nil {
		t.Fatalf("ENI %s gone or detached in EC2", rec.ID)
	}
}

func TestReleaseWaitsForAvailableWithBackoff(t *testing.T) {
	r := newRig(t, "m5.large")
	ctx := context.Background()
	op, rec := r.ready(t, 2)
	r.sim.SetDelays(0, 20*time.Second)
	if _, err := r.m.StartRelease(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if got := r.onDisk(t, op); got.State != journal.Releasing || got.ReleaseStep != journal.StepDetach {
		t.Fatalf("release start on disk = %s/%s", got.State, got.ReleaseStep)
	}
	describes := r.calls("DescribeNetworkInterfaces")
	start := r.clk.Now()
	if err := r.m.Advance(ctx, op); err != nil {
		t.Fatal(err)
	}
	took := r.clk.Since(start)
	polls := r.calls("DescribeNetworkInterfaces") - describes
	if _, ok := r.m.Record(op); ok {
		t.Fatal("released ENI still in the books")
	}
	if _, ok := r.sim.ENI(rec.ID); ok {
		t.Fatalf("ENI %s still exists in EC2", rec.ID)
	}
	// Detaching takes 20 s: polls at 0, 1, 3, 7, 15, 31 s with a doubling delay, not one a second. (A busy
	// machine's stall can carry the virtual clock past the detach between two polls: one poll may be all.)
	if took < 20*time.Second || polls > 7 || polls < 1 {
		t.Fatalf("release took %v with %d polls; want at least the 20 s detach with a handful of polls", took, polls)
	}
	if n := r.calls("DetachNetworkInterface"); n != 1 {
		t.Fatalf("%d detach calls, want 1", n)
	}
}

func TestConcurrentAttachesNeverShareADeviceIndex(t *testing.T) {
	r := newRig(t, "m5.4xlarge")
	ctx := context.Background()
	var ops []string
	for range 5 {
		op, err := r.m.Plan(ctx, 1, eni.Placement{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.m.Advance(ctx, op); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Go(func() {
			if err := r.m.Advance(ctx, op); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var idx []int
	for _, op := range ops {
		rec, _ := r.m.Record(op)
		idx = append(idx, rec.DeviceIndex)
	}
	slices.Sort(idx)
	if !slices.Equal(idx, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("device indexes %v, want 1..5 each once", idx)
	}
}
