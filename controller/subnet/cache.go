package subnet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/internal/clock"
)

// unreadableFor is how long a failed read of a subnet by id stands before it is tried again.
const unreadableFor = time.Minute

// subnetInfo is a subnet as discovery and custom networking see it.
type subnetInfo struct {
	ID   string
	CIDR string
	AZ   string
	Free int
}

// cache is the node's one record of the subnets read from EC2, by id: those discovery's list showed, and those
// read alone by id (an ENIConfig's, an adopted ENI's). A subnet one of them read is known to the other, so
// none is read twice, and a failed read by id ends as soon as the list shows the subnet. Who may touch it: any
// goroutine, under mu.
type cache struct {
	ec2   ec2client.EC2API
	clock clock.Clock
	log   *slog.Logger

	mu   sync.Mutex
	byID map[string]subnetInfo
	// unreadable are the failed reads by id, each tried again after unreadableFor.
	unreadable map[string]failedRead
}

// failedRead is a failed read of a subnet and when it happened.
type failedRead struct {
	err error
	at  time.Time
}

func newCache(api ec2client.EC2API, clk clock.Clock, log *slog.Logger) *cache {
	return &cache{ec2: api, clock: clk, log: log, byID: map[string]subnetInfo{}, unreadable: map[string]failedRead{}}
}

// put records subnets read from EC2 (or known otherwise, as the node's own).
func (c *cache) put(subnets ...subnetInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sn := range subnets {
		c.byID[sn.ID] = sn
		delete(c.unreadable, sn.ID)
	}
}

// get returns the subnet with id if it was read already. No I/O.
func (c *cache) get(id string) (subnetInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sn, ok := c.byID[id]
	return sn, ok
}

// read returns the subnet with id, read from EC2 the first time nothing else did. A failed read stands for
// unreadableFor.
func (c *cache) read(ctx context.Context, id string) (subnetInfo, error) {
	c.mu.Lock()
	sn, ok := c.byID[id]
	failed, hasFailed := c.unreadable[id]
	c.mu.Unlock()
	if ok {
		return sn, nil
	}
	if hasFailed && c.clock.Since(failed.at) < unreadableFor {
		return subnetInfo{}, failed.err
	}
	return c.reread(ctx, id)
}

// reread reads the subnet with id from EC2 now, whatever the cache holds, and caches what it read; a failed
// read is noted for read (unreadableFor) and logged.
func (c *cache) reread(ctx context.Context, id string) (subnetInfo, error) {
	out, err := describeSubnets(ctx, c.ec2, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("subnet %s not found", id)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("reading a subnet; tried again in a minute", "subnet", id, "error", err)
			c.mu.Lock()
			c.unreadable[id] = failedRead{err: err, at: c.clock.Now()}
			c.mu.Unlock()
		}
		return subnetInfo{}, err
	}
	sn := subnetFrom(out[0])
	c.put(sn)
	return sn, nil
}

func subnetFrom(sn types.Subnet) subnetInfo {
	return subnetInfo{ID: aws.ToString(sn.SubnetId), CIDR: aws.ToString(sn.CidrBlock), AZ: aws.ToString(sn.AvailabilityZone),
		Free: int(aws.ToInt32(sn.AvailableIpAddressCount))}
}

// describeSubnets reads every page of a DescribeSubnets.
func describeSubnets(ctx context.Context, api ec2client.EC2API, in *ec2.DescribeSubnetsInput) ([]types.Subnet, error) {
	var out []types.Subnet
	p := ec2.NewDescribeSubnetsPaginator(api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing subnets: %w", err)
		}
		out = append(out, page.Subnets...)
	}
	return out, nil
}
