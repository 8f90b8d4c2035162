package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// vpcCNINode models, in behaviour, the AWS VPC CNI's ipamd in prefix mode (ENABLE_PREFIX_DELEGATION=true,
// WARM_PREFIX_TARGET=1), from the facts in docs/ec2-facts.md ("The pool in prefix mode"), with the real SDK:
//
//   - SDK client with the standard retryer at 10 attempts (RetryMaxAttempts=10), delays scaled to virtual
//     time; no client-side limiter. Books in memory, read from EC2 at start (nodeInit).
//   - The pool loop every 5 s (2.5 s, increase, 2.5 s): the pool is low when it holds fewer than kubelet's max
//     pods and fewer than 16 addresses are free (assigned ones aside). It then asks for one /28 prefix with
//     AssignPrivateIpAddresses on an ENI with a free slot (primary first), else, while the instance takes more
//     ENIs, creates one with its prefix and tags in the CreateNetworkInterface, finds a device index with
//     DescribeInstances, attaches it and sets DeleteOnTermination; a failed attach or modify frees the ENI.
//   - InsufficientCidrBlocks (or InsufficientFreeAddressesInSubnet) pauses all growth for 120 s, after which the
//     same prefix call is made again. There is no fallback to single IPs.
//   - Not reproduced: the 60 s IMDS reconcile, pool decrease, the leaked-ENI GC, IP cooldown.
type vpcCNINode struct {
	w       *world
	inst    ec2sim.Instance
	it      ec2sim.InstanceType
	maxPods int
	log     *slog.Logger
	api     *ec2.Client
	run     runner

	mu        sync.Mutex
	ready     bool
	enis      map[string]*cniENI
	pods      map[string]string
	cidrError time.Time
}

type cniENI struct {
	id      string
	primary bool
	slots   int
	ipamdAddrs
}

// vpcCNICidrCooldown is ipamd's insufficientCidrErrorCooldown.
const vpcCNICidrCooldown = 120 * time.Second

func newVPCCNINode(w *world, inst ec2sim.Instance, set nodeSettings) *vpcCNINode {
	it, _ := ec2sim.LookupInstanceType(inst.Type)
	std := retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 10 })
	n := &vpcCNINode{w: w, inst: inst, it: it, maxPods: kubeletMaxPods(it), log: set.log.With("instance", inst.ID),
		pods: map[string]string{}}
	n.api = w.sdk(scaledRetryer{RetryerV2: std, clk: w.clk}, n.settled)
	return n
}

func (n *vpcCNINode) start(ctx context.Context) error {
	n.mu.Lock()
	n.enis, n.pods, n.ready = map[string]*cniENI{}, map[string]string{}, false
	n.mu.Unlock()
	n.run.start(ctx, n.loop)
	return nil
}

func (n *vpcCNINode) stop() { n.run.stop() }

// addWaits: the model answers an ADD at once.
func (n *vpcCNINode) addWaits() bool { return false }

func (n *vpcCNINode) loop(ctx context.Context) { ipamdLoop(ctx, n.w.clk, n.nodeInit, n.increasePool) }

// nodeInit reads the instance's ENIs, their IPs and prefixes from EC2 into the books.
func (n *vpcCNINode) nodeInit(ctx context.Context) bool {
	out, err := n.api.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{n.inst.ID}}}})
	if err != nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ni := range out.NetworkInterfaces {
		e := &cniENI{id: aws.ToString(ni.NetworkInterfaceId), ipamdAddrs: ipamdAddrs{used: map[string]bool{}}}
		e.primary = ni.Attachment != nil && aws.ToInt32(ni.Attachment.DeviceIndex) == 0
		for _, p := range ni.PrivateIpAddresses {
			if !aws.ToBool(p.Primary) {
				e.addrs = append(e.addrs, aws.ToString(p.PrivateIpAddress))
				e.slots++
			}
		}
		for _, p := range ni.Ipv4Prefixes {
			e.addPrefix(aws.ToString(p.Ipv4Prefix))
		}
		n.enis[e.id] = e
	}
	n.ready = true
	return true
}

func (e *cniENI) addPrefix(cidr string) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return
	}
	e.slots++
	for a, i := p.Addr(), 0; i < ipsPerPrefix; a, i = a.Next(), i+1 {
		e.addrs = append(e.addrs, a.String())
	}
}

// sortedENIs lists the books' ENIs, primary first. Under n.mu.
func (n *vpcCNINode) sortedENIs() []*cniENI {
	out := make([]*cniENI, 0, len(n.enis))
	for _, e := range n.enis {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].primary != out[j].primary {
			return out[i].primary
		}
		return out[i].id < out[j].id
	})
	return out
}

func (n *vpcCNINode) increasePool(ctx context.Context) {
	now := n.w.clk.Now()
	n.mu.Lock()
	if now.Sub(n.cidrError) < vpcCNICidrCooldown {
		n.mu.Unlock()
		return
	}
	total, free := 0, 0
	room := ""
	for _, e := range n.sortedENIs() {
		total += len(e.addrs)
		free += e.free()
		if room == "" && e.slots < n.it.IPv4PerENI-1 {
			room = e.id
		}
	}
	count := len(n.enis)
	n.mu.Unlock()
	if total >= n.maxPods || free >= ipsPerPrefix {
		return
	}
	if room != "" {
		out, err := n.api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(room),
			Ipv4PrefixCount: aws.Int32(1)})
		if err != nil {
			n.failed(err)
			return
		}
		n.mu.Lock()
		if e := n.enis[room]; e != nil {
			for _, p := range out.AssignedIpv4Prefixes {
				e.addPrefix(aws.ToString(p.Ipv4Prefix))
			}
		}
		n.mu.Unlock()
		return
	}
	if count >= n.it.MaxENIs {
		return
	}
	e, err := n.allocENI(ctx)
	if err != nil {
		n.failed(err)
		return
	}
	n.mu.Lock()
	n.enis[e.id] = e
	n.mu.Unlock()
}

// failed starts the 120 s pause when the subnet refused.
func (n *vpcCNINode) failed(err error) {
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == ec2sim.CodeInsufficientCidrBlocks || ae.ErrorCode() == ec2sim.CodeInsufficientFreeAddresses) {
		n.mu.Lock()
		n.cidrError = n.w.clk.Now()
		n.mu.Unlock()
	}
	n.log.Debug("increasing the pool failed", "error", err)
}

// allocENI is today's AllocENI: tags and the prefix in the create, then device index, attach, DeleteOnTermination;
// FreeENI (detach, delete) when the attach or the modify fails.
func (n *vpcCNINode) allocENI(ctx context.Context) (*cniENI, error) {
	out, err := n.api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(n.inst.SubnetID),
		Groups: n.inst.SecurityGroups, Description: aws.String("aws-K8S-" + n.inst.ID), Ipv4PrefixCount: aws.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{
			{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(n.inst.ID)},
			{Key: aws.String("node.k8s.amazonaws.com/createdAt"), Value: aws.String(n.w.clk.Now().UTC().Format(time.RFC3339))}}}}})
	if err != nil {
		return nil, fmt.Errorf("creating ENI: %w", err)
	}
	ni := out.NetworkInterface
	e := &cniENI{id: aws.ToString(ni.NetworkInterfaceId), ipamdAddrs: ipamdAddrs{used: map[string]bool{}}}
	for _, p := range ni.Ipv4Prefixes {
		e.addPrefix(aws.ToString(p.Ipv4Prefix))
	}
	desc, err := n.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{n.inst.ID}})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("finding a device index: %w", err), n.freeENI(ctx, e.id, ""))
	}
	used := map[int32]bool{}
	for _, r := range desc.Reservations {
		for _, inst := range r.Instances {
			for _, x := range inst.NetworkInterfaces {
				if x.Attachment != nil {
					used[aws.ToInt32(x.Attachment.DeviceIndex)] = true
				}
			}
		}
	}
	idx := int32(0)
	for used[idx] {
		idx++
	}
	att, err := n.api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(n.inst.ID),
		NetworkInterfaceId: aws.String(e.id), DeviceIndex: aws.Int32(idx)})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("attaching ENI %s: %w", e.id, err), n.freeENI(ctx, e.id, ""))
	}
	_, err = n.api.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(e.id),
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)}})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("setting DeleteOnTermination on %s: %w", e.id, err), n.freeENI(ctx, e.id, aws.ToString(att.AttachmentId)))
	}
	return e, nil
}

// freeENI detaches (when attached) and deletes an ENI, retrying the delete until it is detached.
func (n *vpcCNINode) freeENI(ctx context.Context, id, attachment string) error {
	if attachment != "" {
		if _, err := n.api.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attachment)}); err != nil {
			return fmt.Errorf("detaching ENI %s: %w", id, err)
		}
	}
	var err error
	for range legacyDeleteRetries {
		if _, err = n.api.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)}); err == nil {
			return nil
		}
		if !sleepCtx(ctx, n.w.clk, 2*time.Second) {
			break
		}
	}
	return fmt.Errorf("deleting ENI %s: %w", id, err)
}

func (n *vpcCNINode) settled() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready
}

func (n *vpcCNINode) books() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return idSet(n.enis)
}

func (n *vpcCNINode) assign(_ context.Context, pod string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return assignPod(n.pods, pod, n.addrSets())
}

func (n *vpcCNINode) release(_ context.Context, pod string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	releasePod(n.pods, pod, n.addrSets())
	return nil
}

// addrSets are the ENIs' addresses, primary first, the order pods take them. Under n.mu.
func (n *vpcCNINode) addrSets() []*ipamdAddrs {
	enis := n.sortedENIs()
	out := make([]*ipamdAddrs, 0, len(enis))
	for _, e := range enis {
		out = append(out, &e.ipamdAddrs)
	}
	return out
}
