package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
)

// describeLog records which list each DescribeNetworkInterfaces of a node asked for.
type describeLog struct {
	ec2client.EC2API
	mu    sync.Mutex
	calls []string // "attached", "own available", "orphan sweep" or "by id"
}

func (d *describeLog) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, o ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	what := "by id"
	for _, f := range in.Filters {
		switch aws.ToString(f.Name) {
		case "attachment.instance-id":
			what = "attached"
		case "tag:" + eni.TagOwner:
			what = "own available"
		case "tag:" + eni.TagCluster:
			what = "orphan sweep"
		}
	}
	d.mu.Lock()
	d.calls = append(d.calls, what)
	d.mu.Unlock()
	return d.EC2API.DescribeNetworkInterfaces(ctx, in, o...)
}

// list is the calls so far, a copy.
func (d *describeLog) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *describeLog) count(what string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		if c == what {
			n++
		}
	}
	return n
}

// TestAFreshNodeListsItsOwnAvailableENIsAtItsSecondReconcile: a node that starts with empty books (a new
// instance) has no ENI operation of its own to finish, so its first reconcile, which every pod of the node waits
// for, lists only the ENIs attached to it: one DescribeNetworkInterfaces, not two, in the minutes a rollout's
// nodes all start together and share the account's describe bucket. Its own available ENIs, which only a journal
// lost on this instance could leave behind, are listed at the next reconcile, and such a leftover is collected
// then. A node that restarts with its books lists them at its first reconcile.
func TestAFreshNodeListsItsOwnAvailableENIsAtItsSecondReconcile(t *testing.T) {
	w := newWorld(t, "m5.large", 100)
	api := w.ec2(nil)
	// What an agent whose journal was lost left on this instance: an available ENI it created an hour ago.
	out, err := api.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(w.inst.SubnetID),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{
			{Key: aws.String(eni.TagOwner), Value: aws.String(w.inst.ID)},
			{Key: aws.String(eni.TagCluster), Value: aws.String("test")},
			{Key: aws.String(eni.TagCreatedAt), Value: aws.String(w.clk.Now().Add(-time.Hour).UTC().Format(time.RFC3339))},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	leftover := aws.ToString(out.NetworkInterface.NetworkInterfaceId)

	log := &describeLog{EC2API: api}
	cfg := fastConfig(w.dir)
	cfg.OrphanSweepInterval = -1
	r := w.start(cfg, log, nil)
	waitReady(t, r.node)
	if n := log.count("own available"); n != 0 {
		t.Fatalf("the fresh node's first reconcile listed its own available ENIs (%d calls; %v): a second describe "+
			"while a rollout's nodes all start", n, log.list())
	}
	if n := log.count("attached"); n != 1 {
		t.Fatalf("%d lists of the attached ENIs before the node was ready; want 1 (%v)", n, log.list())
	}
	eventually(t, 30*time.Second, "the leftover ENI collected at the second reconcile", func() error {
		if _, ok := w.sim.ENI(leftover); ok {
			return fmt.Errorf("%s still exists (describes: %v)", leftover, log.list())
		}
		return nil
	})
	if n := log.count("own available"); n != 1 {
		t.Errorf("%d lists of the own available ENIs by the second reconcile; want 1 (%v)", n, log.list())
	}
	w.passVirtual(3*time.Minute, nil)
	if n, all := log.count("own available"), log.count("attached"); n != 1 || all < 3 {
		t.Errorf("in 3 more minutes, %d reconciles listed the own available ENIs again (%d reconciles); want none, "+
			"the list is owed once (%v)", n-1, all, log.list())
	}

	r.stop()
	again := &describeLog{EC2API: api}
	r = w.start(cfg, again, nil)
	waitReady(t, r.node)
	// Ready at once on its books (issue 36 item 11), it lists them at its first reconcile, beside the attached
	// ENIs, not at the second.
	eventually(t, 30*time.Second, "the restarted node's list of its own available ENIs", func() error {
		if n := again.count("own available"); n != 1 {
			return fmt.Errorf("%d lists (%v)", n, again.list())
		}
		return nil
	})
	calls := again.list()
	second := len(calls) // where the second reconcile's list of the attached ENIs is
	if first := slices.Index(calls, "attached"); first >= 0 {
		if i := slices.Index(calls[first+1:], "attached"); i >= 0 {
			second = first + 1 + i
		}
	}
	if own := slices.Index(calls, "own available"); own > second {
		t.Errorf("a node restarted with its books listed its own available ENIs after its first reconcile; want in it (%v)", calls)
	}
}
