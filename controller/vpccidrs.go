package controller

// The VPC's IPv4 CIDR blocks are "inside the VPC" for the datapath and SNAT: pod traffic to them leaves by
// the pod's ENI untranslated. IMDS gives them at start; a block associated later (a secondary CIDR for pods,
// 100.64.0.0/16 say) must reach the datapath without a restart, or pod traffic to pods in it would be
// source-NATed to the node and break. So the controller reads DescribeVpcs at start and then at most every
// VPCRefreshInterval, with the reconcile, and tells the datapath when the set changed.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// vpcCIDRs follows the VPC's blocks. Who may touch it: the Run loop refreshes; Status reads under mu.
type vpcCIDRs struct {
	ec2   ec2client.EC2API
	dp    dptypes.Driver
	vpcID string
	every time.Duration
	log   *slog.Logger

	// next is when the blocks are read again; told says whether the datapath holds cur; retry is the wait
	// after the last failed read (0 while reads succeed; failures are logged once per streak).
	next  time.Time
	told  bool
	retry time.Duration

	mu  sync.Mutex
	cur []netip.Prefix // sorted
}

func newVPCCIDRs(api ec2client.EC2API, dp dptypes.Driver, info metadata.Node, every time.Duration, log *slog.Logger) *vpcCIDRs {
	v := &vpcCIDRs{ec2: api, dp: dp, vpcID: info.VPCID, every: every, log: log}
	for _, p := range info.VPCCIDRs {
		v.cur = append(v.cur, p.Masked())
	}
	slices.SortFunc(v.cur, comparePrefixes)
	// The datapath was opened with IMDS's list: it holds cur already.
	v.told = true
	return v
}

// refresh reads the VPC's blocks when due and tells the datapath of a change. A failure keeps the set the
// datapath has and tries again at the next round.
func (v *vpcCIDRs) refresh(ctx context.Context, now time.Time) {
	if v.vpcID == "" || now.Before(v.next) && v.told {
		return
	}
	got, err := v.read(ctx)
	if err != nil {
		if v.retry == 0 {
			v.log.Warn("reading the VPC's CIDR blocks; keeping the datapath's", "vpc", v.vpcID, "error", err)
		}
		// A rollout's nodes all read at start and EC2 throttles many: the retries spread (full jitter) and
		// grow to the interval, so that they do not come back together.
		v.retry = min(max(2*v.retry, 30*time.Second), v.every)
		v.next = now.Add(time.Duration(rand.Int64N(int64(v.retry))) + time.Second)
		return
	}
	v.retry = 0
	v.next = now.Add(v.every)
	v.mu.Lock()
	changed := !slices.Equal(got, v.cur)
	was := v.cur
	v.cur = got
	v.mu.Unlock()
	if !changed && v.told {
		return
	}
	if err := v.dp.SetVPCCIDRs(ctx, got); err != nil {
		v.told = false
		v.log.Error("telling the datapath the VPC's CIDR blocks", "cidrs", got, "error", err)
		return
	}
	v.told = true
	v.log.Info("VPC CIDR blocks changed; datapath and SNAT follow", "cidrs", got, "was", was)
}

// read returns the VPC's associated IPv4 blocks, sorted.
func (v *vpcCIDRs) read(ctx context.Context) ([]netip.Prefix, error) {
	out, err := v.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{v.vpcID}})
	if err != nil {
		return nil, fmt.Errorf("describing VPC %s: %w", v.vpcID, err)
	}
	if len(out.Vpcs) == 0 {
		return nil, fmt.Errorf("describing VPC %s: not listed", v.vpcID)
	}
	var got []netip.Prefix
	for _, a := range out.Vpcs[0].CidrBlockAssociationSet {
		if a.CidrBlockState == nil || a.CidrBlockState.State != types.VpcCidrBlockStateCodeAssociated {
			continue
		}
		p, err := netip.ParsePrefix(aws.ToString(a.CidrBlock))
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if p = p.Masked(); !slices.Contains(got, p) {
			got = append(got, p)
		}
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("describing VPC %s: no associated IPv4 block", v.vpcID)
	}
	slices.SortFunc(got, comparePrefixes)
	return got, nil
}

// list returns the blocks as strings, for the status.
func (v *vpcCIDRs) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, len(v.cur))
	for i, p := range v.cur {
		out[i] = p.String()
	}
	return out
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
