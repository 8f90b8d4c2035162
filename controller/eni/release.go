package eni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
)

// ErrBusy is returned by StartRelease for an ENI that still holds pods or IPs in cooldown, or is primary.
var ErrBusy = errors.New("ENI is in use")

// StartRelease journals the decision to release the ENI eniID. Its IPs stop being handed out at once; the
// detach, the wait and the delete follow through Advance, each journaled before its call.
func (m *Manager) StartRelease(ctx context.Context, eniID string) (string, error) {
	var opID string
	now := m.clock.Now()
	err := m.books.Update(ctx, func(st *journal.State) error {
		e := st.ENIByID(eniID)
		if e == nil {
			return fmt.Errorf("releasing ENI %s: not in the books", eniID)
		}
		if e.Primary {
			return fmt.Errorf("releasing ENI %s: %w: primary", eniID, ErrBusy)
		}
		if err := heldBy(st, eniID, now); err != nil {
			return fmt.Errorf("releasing ENI %s: %w", eniID, err)
		}
		for _, op := range st.IPOps {
			if op.ENI == eniID {
				return fmt.Errorf("releasing ENI %s: %w: IP operation %s pending", eniID, ErrBusy, op.OpID)
			}
		}
		opID = e.OpID
		e.ReleaseStep = journal.StepDetach
		if e.AttachmentID == "" {
			e.ReleaseStep = journal.StepDelete
		}
		e.State, e.Since, e.Attempts, e.LastError = journal.Releasing, now, 0, ""
		return nil
	})
	if err != nil {
		return "", err
	}
	m.log.Info("ENI release started", "op", opID, "eni", eniID)
	return opID, nil
}

// heldBy returns an ErrBusy saying why the ENI's addresses must stay: a pod holds one, or one is cooling
// down; nil when neither.
func heldBy(st *journal.State, eniID string, now time.Time) error {
	for _, a := range st.Assignments {
		if a.ENI == eniID {
			return fmt.Errorf("%w: IP %s assigned to %s", ErrBusy, a.IP, a.ContainerID)
		}
	}
	for _, c := range st.Cooldowns {
		if c.ENI == eniID && now.Before(c.Until) {
			return fmt.Errorf("%w: IP %s cooling down", ErrBusy, c.IP)
		}
	}
	return nil
}

func (m *Manager) setStep(ctx context.Context, opID string, step journal.ReleaseStep) error {
	return m.updateENI(ctx, opID, func(e *journal.ENI) {
		e.ReleaseStep, e.Since, e.Attempts, e.LastError = step, m.clock.Now(), 0, ""
	})
}

func (m *Manager) forget(ctx context.Context, rec journal.ENI, why string) error {
	err := m.books.Update(ctx, func(st *journal.State) error {
		st.RemoveENI(rec.OpID)
		st.Cooldowns = dropENI(st.Cooldowns, rec.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("journaling removal of ENI %s: %w", rec.ID, err)
	}
	m.mu.Lock()
	if m.occupied[rec.DeviceIndex] == rec.ID {
		delete(m.occupied, rec.DeviceIndex)
	}
	m.mu.Unlock()
	m.log.Info("ENI released", "op", rec.OpID, "eni", rec.ID, "why", why)
	return nil
}

func dropENI(cs []journal.Cooldown, eniID string) []journal.Cooldown {
	out := cs[:0]
	for _, c := range cs {
		if c.ENI != eniID {
			out = append(out, c)
		}
	}
	return out
}

func (m *Manager) release(ctx context.Context, rec journal.ENI) error {
	switch rec.ReleaseStep {
	case journal.StepDetach:
		_, err := m.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(rec.AttachmentID)})
		if err != nil && ec2client.ErrorCode(err) != ec2client.CodeAttachmentNotFound {
			return ec2client.Classify("detaching ENI "+rec.ID, err)
		}
		if err := m.setStep(ctx, rec.OpID, journal.StepWait); err != nil {
			return err
		}
		next, ok := m.Record(rec.OpID)
		if !ok {
			return nil
		}
		return m.waitAvailable(ctx, next)
	case journal.StepWait:
		return m.waitAvailable(ctx, rec)
	case journal.StepDelete:
		_, err := m.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(rec.ID)})
		switch code := ec2client.ErrorCode(err); {
		case err == nil || code == ec2client.CodeENINotFound:
			return m.forget(ctx, rec, "deleted")
		case code == ec2client.CodeInvalidParameterValue || code == ec2client.CodeENIInUse:
			// "is currently in use" means attached: read it again and take it back, never count it as gone.
			return m.readopt(ctx, rec)
		default:
			return ec2client.Classify("deleting ENI "+rec.ID, err)
		}
	}
	return fmt.Errorf("releasing ENI %s: unknown step %q", rec.ID, rec.ReleaseStep)
}

// waitAvailable polls Describe with exponential backoff (on the clock) until the ENI is available, then
// journals the delete step. It gives up after WaitTimeout with ec2client.ErrTransient; the next Advance resumes.
func (m *Manager) waitAvailable(ctx context.Context, rec journal.ENI) error {
	deadline := m.clock.Now().Add(m.cfg.WaitTimeout)
	delay := time.Second
	for {
		ni, err := m.describeOne(ctx, rec.ID)
		if err != nil && !errors.Is(err, ec2client.ErrTransient) {
			return err
		}
		switch {
		case err != nil:
		case ni == nil:
			return m.forget(ctx, rec, "gone")
		case ni.Status == types.NetworkInterfaceStatusAvailable:
			if err := m.setStep(ctx, rec.OpID, journal.StepDelete); err != nil {
				return err
			}
			rec.ReleaseStep = journal.StepDelete
			return m.release(ctx, rec)
		case ni.Attachment != nil && ni.Attachment.Status == types.AttachmentStatusAttached &&
			m.clock.Since(rec.Since) > m.cfg.WaitTimeout:
			// The detach never took (lost request): detach again.
			return m.setStep(ctx, rec.OpID, journal.StepDetach)
		}
		if m.clock.Now().Add(delay).After(deadline) {
			return fmt.Errorf("waiting for ENI %s to detach: %w: still %s", rec.ID, ec2client.ErrTransient, statusOf(ni))
		}
		if err := m.clock.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(delay*2, 30*time.Second)
	}
}

func statusOf(ni *types.NetworkInterface) string {
	if ni == nil {
		return "unknown"
	}
	return string(ni.Status)
}

// readopt puts an ENI that EC2 says is in use back into the books as attached.
func (m *Manager) readopt(ctx context.Context, rec journal.ENI) error {
	ni, err := m.describeOne(ctx, rec.ID)
	if err != nil {
		return err
	}
	if ni == nil {
		return m.forget(ctx, rec, "gone")
	}
	a := ni.Attachment
	if a == nil || aws.ToString(a.InstanceId) != m.cfg.InstanceID {
		return m.setStep(ctx, rec.OpID, journal.StepWait)
	}
	if a.Status == types.AttachmentStatusDetaching {
		return m.setStep(ctx, rec.OpID, journal.StepWait)
	}
	m.log.Warn("ENI to delete is attached; re-adopting it", "op", rec.OpID, "eni", rec.ID)
	return m.markAttached(ctx, rec.OpID, ni)
}

// describeOne returns EC2's view of one ENI, nil when EC2 says it does not exist.
func (m *Manager) describeOne(ctx context.Context, id string) (*types.NetworkInterface, error) {
	out, err := m.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if ec2client.ErrorCode(err) == ec2client.CodeENINotFound {
		return nil, nil
	}
	if err != nil {
		return nil, ec2client.Classify("describing ENI "+id, err)
	}
	for i := range out.NetworkInterfaces {
		if aws.ToString(out.NetworkInterfaces[i].NetworkInterfaceId) == id {
			return &out.NetworkInterfaces[i], nil
		}
	}
	return nil, nil
}

// describeFiltered lists every ENI matching filters, following pagination.
func (m *Manager) describeFiltered(ctx context.Context, filters ...types.Filter) ([]types.NetworkInterface, error) {
	var all []types.NetworkInterface
	p := ec2.NewDescribeNetworkInterfacesPaginator(m.ec2, &ec2.DescribeNetworkInterfacesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, ec2client.Classify("listing ENIs", err)
		}
		all = append(all, out.NetworkInterfaces...)
	}
	return all, nil
}

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}
