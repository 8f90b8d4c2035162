package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// legacyNode reproduces, in behaviour, the AWS VPC CNI's ipamd of the seed issue (awsutils.go AllocENI at 73ab7f5
// and ipamd's increaseIPPool), with the real SDK:
//
//   - SDK client with the default standard retryer: 3 attempts, retry quota on, throttles retried. Its delays
//     are scaled to virtual time; nothing else changes. No client-side limiter.
//   - AllocENI: CreateNetworkInterface (no tags, SDK-generated ClientToken), then a separate CreateTags whose
//     error is ignored, then DescribeInstances to find a free device index and AttachNetworkInterface; when
//     the attach fails, deleteENI. Then ModifyNetworkInterfaceAttribute DeleteOnTermination=true; when it fails
//     (e.g. throttled), deleteENI on the still-attached ENI, which EC2 refuses ("is currently in use") 20 times
//     5 s apart, and AllocENI returns an error: the ENI stays attached, without DeleteOnTermination, and is in
//     no books. (PR #538 later made this FreeENI, detach then delete; the seed deleted.)
//   - deleteENI: up to 20 DeleteNetworkInterface calls, 5 s apart, as the seed logs ("attempt 1/20").
//   - Books in memory only. The pool loop every 5 s (ipamd sleeps 2.5 s around its steps): when the pool is
//     short of warm IPs, AssignPrivateIpAddresses on an ENI of the books with room, else, while the books hold
//     fewer ENIs than the type's maximum, AllocENI followed by AssignPrivateIpAddresses for its IPs. An ENI lost
//     as above makes the books short by one forever, so every further AllocENI ends in AttachmentLimitExceeded.
//   - At start (and after a kill), nodeInit reads the ENIs attached to the instance from EC2 into the books.
//   - Not reproduced: the IMDS reconcile of later versions (which adopts unknown ENIs, still without
//     DeleteOnTermination), the leaked-ENI GC (v1.6), ENI release on surplus, IP cooldown.
type legacyNode struct {
	w     *world
	inst  ec2sim.Instance
	it    ec2sim.InstanceType
	warm  int
	log   *slog.Logger
	api   *ec2.Client
	run   runner
	ready bool

	mu   sync.Mutex
	enis map[string]*legacyENI
	pods map[string]string
}

type legacyENI struct {
	id      string
	primary bool
	ipamdAddrs
}

const (
	legacyDeleteRetries  = 20
	legacyDeleteInterval = 5 * time.Second
	legacyLoopHalf       = 2500 * time.Millisecond
)

func newLegacyNode(w *world, inst ec2sim.Instance, set nodeSettings) *legacyNode {
	it, _ := ec2sim.LookupInstanceType(inst.Type)
	retryer := scaledRetryer{RetryerV2: retry.NewStandard(), clk: w.clk}
	return &legacyNode{w: w, inst: inst, it: it, warm: set.warmENI, log: set.log.With("instance", inst.ID),
		api: w.sdk(retryer, nil), pods: map[string]string{}}
}

func (n *legacyNode) start(ctx context.Context) error {
	n.mu.Lock()
	n.enis, n.pods, n.ready = map[string]*legacyENI{}, map[string]string{}, false
	n.mu.Unlock()
	n.run.start(ctx, n.loop)
	return nil
}

func (n *legacyNode) stop() { n.run.stop() }

// addWaits: the model answers an ADD at once.
func (n *legacyNode) addWaits() bool { return false }

func (n *legacyNode) loop(ctx context.Context) { ipamdLoop(ctx, n.w.clk, n.nodeInit, n.increasePool) }

// ipamdLoop runs an ipamd model as the AWS VPC CNI's daemon runs: nodeInit until it succeeds, then the pool
// loop every 2 legacyLoopHalf.
func ipamdLoop(ctx context.Context, clk clock.Clock, nodeInit func(context.Context) bool, increasePool func(context.Context)) {
	for ctx.Err() == nil && !nodeInit(ctx) {
		if !sleepCtx(ctx, clk, 2*legacyLoopHalf) {
			return
		}
	}
	for {
		if !sleepCtx(ctx, clk, legacyLoopHalf) {
			return
		}
		increasePool(ctx)
		if !sleepCtx(ctx, clk, legacyLoopHalf) {
			return
		}
	}
}

// nodeInit reads what EC2 shows attached into the books, as ipamd does at start.
func (n *legacyNode) nodeInit(ctx context.Context) bool {
	out, err := n.api.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{n.inst.ID}}}})
	if err != nil {
		n.log.Debug("nodeInit failed", "error", err)
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ni := range out.NetworkInterfaces {
		e := &legacyENI{id: aws.ToString(ni.NetworkInterfaceId), ipamdAddrs: ipamdAddrs{used: map[string]bool{}}}
		e.primary = ni.Attachment != nil && aws.ToInt32(ni.Attachment.DeviceIndex) == 0
		for _, p := range ni.PrivateIpAddresses {
			if !aws.ToBool(p.Primary) {
				e.addrs = append(e.addrs, aws.ToString(p.PrivateIpAddress))
			}
		}
		n.enis[e.id] = e
	}
	n.ready = true
	return true
}

func (n *legacyNode) perENI() int { return n.it.IPv4PerENI - 1 }

// warmENI is WARM_ENI_TARGET: the type's maximum ENIs unless the scenario set one.
func (n *legacyNode) warmENI() int {
	if n.warm == 0 {
		return n.it.MaxENIs
	}
	return n.warm
}

// increasePool is ipamd's increaseIPPool: fill an ENI with room, else allocate an ENI while the books allow.
func (n *legacyNode) increasePool(ctx context.Context) {
	n.mu.Lock()
	free, count := 0, len(n.enis)
	var room string
	ids := make([]string, 0, len(n.enis))
	for id := range n.enis {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e := n.enis[id]
		free += e.free()
		if !e.primary && len(e.addrs) < n.perENI() && room == "" {
			room = id
		}
	}
	n.mu.Unlock()
	if free >= n.warmENI()*n.perENI() {
		return
	}
	if room != "" {
		n.assignIPs(ctx, room)
		return
	}
	if count >= n.it.MaxENIs {
		return
	}
	id, err := n.allocENI(ctx)
	if err != nil {
		n.log.Debug("AllocENI failed", "error", err)
		return
	}
	n.mu.Lock()
	n.enis[id] = &legacyENI{id: id, ipamdAddrs: ipamdAddrs{used: map[string]bool{}}}
	n.mu.Unlock()
	n.assignIPs(ctx, id)
}

func (n *legacyNode) assignIPs(ctx context.Context, id string) {
	n.mu.Lock()
	want := n.perENI() - len(n.enis[id].addrs)
	n.mu.Unlock()
	out, err := n.api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id),
		SecondaryPrivateIpAddressCount: aws.Int32(int32(want))})
	if err != nil {
		n.log.Debug("assigning IPs failed", "eni", id, "error", err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.enis[id]; e != nil {
		for _, a := range out.AssignedPrivateIpAddresses {
			e.addrs = append(e.addrs, aws.ToString(a.PrivateIpAddress))
		}
	}
}

// allocENI is the seed's AllocENI.
func (n *legacyNode) allocENI(ctx context.Context) (string, error) {
	out, err := n.api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(n.inst.SubnetID),
		Groups: n.inst.SecurityGroups, Description: aws.String("aws-K8S-" + n.inst.ID)})
	if err != nil {
		return "", fmt.Errorf("AllocENI: failed to create ENI: %w", err)
	}
	id := aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	// tagENI: a separate call; its failure is only logged.
	_, _ = n.api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{
		{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(n.inst.ID)}}})
	attachmentID, err := n.attachENI(ctx, id)
	if err != nil {
		_ = n.deleteENI(ctx, id)
		return "", fmt.Errorf("AllocENI: error attaching ENI: %w", err)
	}
	_, err = n.api.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(id),
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(attachmentID), DeleteOnTermination: aws.Bool(true)}})
	if err != nil {
		n.log.Warn("modify failed; deleting the attached ENI", "eni", id, "error", err)
		if derr := n.deleteENI(ctx, id); derr != nil {
			err = errors.Join(err, derr)
		}
		return "", fmt.Errorf("AllocENI: unable to change the ENI's attribute: %w", err)
	}
	return id, nil
}

// attachENI finds the lowest free device index with DescribeInstances and attaches there.
func (n *legacyNode) attachENI(ctx context.Context, id string) (string, error) {
	out, err := n.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{n.inst.ID}})
	if err != nil {
		return "", fmt.Errorf("finding a free device number: %w", err)
	}
	used := map[int32]bool{}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			for _, ni := range inst.NetworkInterfaces {
				if ni.Attachment != nil {
					used[aws.ToInt32(ni.Attachment.DeviceIndex)] = true
				}
			}
		}
	}
	idx := int32(0)
	for used[idx] {
		idx++
	}
	att, err := n.api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(n.inst.ID),
		NetworkInterfaceId: aws.String(id), DeviceIndex: aws.Int32(idx)})
	if err != nil {
		return "", fmt.Errorf("attaching ENI %s: %w", id, err)
	}
	return aws.ToString(att.AttachmentId), nil
}

// deleteENI is the seed's: up to 20 attempts, 5 s apart.
func (n *legacyNode) deleteENI(ctx context.Context, id string) error {
	var err error
	for range legacyDeleteRetries {
		if _, err = n.api.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)}); err == nil {
			return nil
		}
		if !sleepCtx(ctx, n.w.clk, legacyDeleteInterval) {
			break
		}
	}
	return fmt.Errorf("deleting ENI %s: %w", id, err)
}

func (n *legacyNode) settled() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ready {
		return false
	}
	if n.warm == 0 {
		return len(n.enis) == n.it.MaxENIs
	}
	free := 0
	for _, e := range n.enis {
		free += e.free()
	}
	return free >= n.warmENI()*n.perENI() || len(n.enis) == n.it.MaxENIs
}

func (n *legacyNode) books() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return idSet(n.enis)
}

func (n *legacyNode) assign(_ context.Context, pod string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return assignPod(n.pods, pod, n.addrSets())
}

func (n *legacyNode) release(_ context.Context, pod string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	releasePod(n.pods, pod, n.addrSets())
	return nil
}

// addrSets are the ENIs' addresses in ENI id order, the order pods take them. Under n.mu.
func (n *legacyNode) addrSets() []*ipamdAddrs {
	ids := make([]string, 0, len(n.enis))
	for id := range n.enis {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*ipamdAddrs, 0, len(ids))
	for _, id := range ids {
		out = append(out, &n.enis[id].ipamdAddrs)
	}
	return out
}
