package eni

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// maxFilterValues is how many values EC2 accepts in one filter.
const maxFilterValues = 200

// SweepOrphans deletes the cluster's available ENIs whose owner instance is gone: terminated (or shutting
// down), or unknown to EC2 once the ENI is older than GCGrace. The reconciler collects only this instance's
// ENIs, so an ENI whose node was terminated between its create and its DeleteOnTermination (or whose
// attachment the termination undid) would otherwise stay forever; any node of the cluster may delete it, which
// the IAM policy allows for ENIs carrying the cluster tag. An ENI whose owner still runs is left to its owner,
// however old: under throttling a create can wait minutes for its attach. It returns the ENIs deleted.
func (m *Manager) SweepOrphans(ctx context.Context) ([]string, error) {
	if m.cfg.Cluster == "" {
		return nil, nil
	}
	avail, err := m.describeFiltered(ctx, filter("tag:"+TagCluster, m.cfg.Cluster), filter("status", "available"))
	if err != nil {
		return nil, err
	}
	now := m.clock.Now()
	byOwner := map[string][]types.NetworkInterface{}
	for _, ni := range avail {
		owner := tagValue(&ni, TagOwner)
		if owner == "" || owner == m.cfg.InstanceID || ni.Attachment != nil && aws.ToString(ni.Attachment.InstanceId) != "" {
			continue
		}
		byOwner[owner] = append(byOwner[owner], ni)
	}
	if len(byOwner) == 0 {
		return nil, nil
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	states, err := m.instanceStates(ctx, owners)
	if err != nil {
		return nil, err
	}
	var collected []string
	var errs []error
	for owner, enis := range byOwner {
		state, known := states[owner]
		if known && state != types.InstanceStateNameTerminated && state != types.InstanceStateNameShuttingDown {
			continue
		}
		for _, ni := range enis {
			id := aws.ToString(ni.NetworkInterfaceId)
			if !known {
				// Not listed at all: gone long ago, or launched so recently that EC2 does not show it yet.
				created, perr := time.Parse(time.RFC3339, tagValue(&ni, TagCreatedAt))
				if perr != nil || now.Sub(created) <= m.cfg.GCGrace {
					continue
				}
			}
			_, err := m.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
			switch code := ec2client.ErrorCode(err); {
			case err == nil:
				collected = append(collected, id)
				m.log.Info("orphaned ENI collected", "eni", id, "owner", owner, "ownerState", string(state))
			case code == ec2client.CodeENINotFound:
				// Another node of the cluster collected it first.
			case code == ec2client.CodeENIInUse || code == ec2client.CodeInvalidParameterValue:
				// Attached since the listing: not an orphan.
			default:
				errs = append(errs, ec2client.Classify("collecting orphaned ENI "+id+" of "+owner, err))
			}
		}
	}
	return collected, errors.Join(errs...)
}

// instanceStates returns the state of each of ids that EC2 lists; ids it does not list are absent.
func (m *Manager) instanceStates(ctx context.Context, ids []string) (map[string]types.InstanceStateName, error) {
	out := map[string]types.InstanceStateName{}
	for start := 0; start < len(ids); start += maxFilterValues {
		chunk := ids[start:min(start+maxFilterValues, len(ids))]
		// A filter rather than an ID list: EC2 answers an unknown id in a list with an error for the whole call.
		p := ec2.NewDescribeInstancesPaginator(m.ec2, &ec2.DescribeInstancesInput{
			Filters: []types.Filter{filter("instance-id", chunk...)}, MaxResults: aws.Int32(1000)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, ec2client.Classify("describing the owners of orphaned ENIs", err)
			}
			for _, r := range page.Reservations {
				for _, inst := range r.Instances {
					if inst.State != nil {
						out[aws.ToString(inst.InstanceId)] = inst.State.Name
					}
				}
			}
		}
	}
	return out, nil
}
