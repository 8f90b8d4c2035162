package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
)

// loseFirstCreate applies the first CreateNetworkInterface and loses its answer, as a crash right after the
// call would; it refuses every later create, so the node never learns the answer.
type loseFirstCreate struct {
	ec2client.EC2API
	called atomic.Bool
	lost   atomic.Bool
}

func (l *loseFirstCreate) CreateNetworkInterface(ctx context.Context, in *ec2.CreateNetworkInterfaceInput, o ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	if l.called.Swap(true) {
		return nil, errCrashed
	}
	_, _ = l.EC2API.CreateNetworkInterface(ctx, in, o...)
	l.lost.Store(true)
	return nil, errCrashed
}

// TestACreateReplayedAfterASettingsChangeSendsTheJournaledParameters: the agent planned an ENI and died with
// its create's answer lost; it restarts with other security groups (the instance's changed). The replay with
// the journaled ClientToken must send the parameters of the original request: EC2 answers a token reused
// with other parameters with IdempotentParameterMismatch, and the ENI already created would be orphaned.
func TestACreateReplayedAfterASettingsChangeSendsTheJournaledParameters(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	// EC2 is eventually consistent: the new ENI is not listed yet when the agent comes back, so the reconcile
	// cannot adopt it and the replay of the create is what finds it.
	w.sim.Faults().SetVisibilityDelay(30 * time.Second)
	first := &loseFirstCreate{EC2API: w.ec2(nil)}
	r := w.start(fastConfig(w.dir), first, nil)
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the first create applied and its answer lost", func() error {
		_, _ = r.node.Assign(context.Background(), assignReq("pod-0"))
		if !first.lost.Load() {
			return fmt.Errorf("no create yet")
		}
		return nil
	})
	r.stop()
	var created string
	for _, e := range w.sim.Snapshot().ENIs {
		if e.Tags[eni.TagOwner] == w.inst.ID {
			created = e.ID
		}
	}
	if created == "" {
		t.Fatal("the lost create made no ENI")
	}
	info := w.nodeInfo()
	info.SecurityGroups = append(slices.Clone(info.SecurityGroups), "sg-0123456789abcdef0")
	r = w.startWith(fastConfig(w.dir), controller.Deps{Node: info})
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the created ENI usable in the books", func() error {
		if n := w.sim.Counters()["CreateNetworkInterface"].Errors["IdempotentParameterMismatch"]; n != 0 {
			t.Fatalf("the replay of the create met IdempotentParameterMismatch %d times", n)
		}
		for _, e := range secondary(r.node.Snapshot()) {
			if e.ID == created {
				return nil
			}
		}
		return fmt.Errorf("%s not usable in the books", created)
	})
}
