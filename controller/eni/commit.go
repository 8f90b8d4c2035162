package eni

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
)

// Placement is where a new ENI goes: its subnet and security groups. The zero Placement is the node's own
// subnet with the primary ENI's groups (Config); empty SecurityGroups also mean the primary ENI's.
type Placement struct {
	SubnetID   string
	SubnetCIDR string
	// SecurityGroups of the new ENI; empty: Config.SecurityGroups.
	SecurityGroups []string
	// GroupSet makes the ENI the pool of a pod security-group set (journal.ENI.GroupSet); SecurityGroups are
	// then the set's groups.
	GroupSet string
}

// Plan journals the decision to add an ENI holding wantIPs secondary IPs at at, and returns its operation id.
// No EC2 call is made: the record, with its ClientToken, subnet and groups, is on disk before the create.
func (m *Manager) Plan(ctx context.Context, wantIPs int, at Placement) (string, error) {
	return m.plan(ctx, journal.ENI{WantIPs: wantIPs}, at)
}

// PlanPrefixes is Plan for an ENI created with wantPrefixes /28 prefixes (Ipv4PrefixCount in the create).
func (m *Manager) PlanPrefixes(ctx context.Context, wantPrefixes int, at Placement) (string, error) {
	return m.plan(ctx, journal.ENI{WantPrefixes: wantPrefixes}, at)
}

func (m *Manager) plan(ctx context.Context, want journal.ENI, at Placement) (string, error) {
	if at.SubnetID == "" {
		at.SubnetID, at.SubnetCIDR = m.cfg.SubnetID, m.cfg.SubnetCIDR
	}
	if len(at.SecurityGroups) == 0 {
		at.SecurityGroups = m.cfg.SecurityGroups
	}
	opID := NewOpID()
	now := m.clock.Now()
	rec := journal.ENI{
		OpID: opID, ClientToken: ClientToken(opID), State: journal.Planned, WantIPs: want.WantIPs, WantPrefixes: want.WantPrefixes,
		SubnetID: at.SubnetID, SubnetCIDR: at.SubnetCIDR, DeviceIndex: -1, CreatedAt: now, Since: now,
		SecurityGroups: slices.Clone(at.SecurityGroups), GroupSet: at.GroupSet,
	}
	for _, t := range m.tags(rec) {
		rec.Tags = append(rec.Tags, journal.Tag{Key: aws.ToString(t.Key), Value: aws.ToString(t.Value)})
	}
	err := m.books.Update(ctx, func(st *journal.State) error {
		st.ENIs = append(st.ENIs, rec)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("journaling planned ENI: %w", err)
	}
	m.log.Info("ENI planned", "op", opID, "ips", want.WantIPs, "prefixes", want.WantPrefixes, "subnet", at.SubnetID,
		"securityGroupSet", at.GroupSet)
	return opID, nil
}

// DropPlan forgets a planned ENI whose create EC2 refused for good (ec2client.ErrNoPrefix); a record in any other state
// is left alone.
func (m *Manager) DropPlan(ctx context.Context, opID string) error {
	return m.books.Update(ctx, func(st *journal.State) error {
		if e := st.ENIByOp(opID); e != nil && e.State == journal.Planned {
			st.RemoveENI(opID)
		}
		return nil
	})
}

// Advance runs the next step of the operation opID: create, attach, modify, or one step of a release. It
// returns nil when the step succeeded or the record has reached a resting state.
func (m *Manager) Advance(ctx context.Context, opID string) error {
	rec, ok := m.Record(opID)
	if !ok {
		return nil
	}
	var err error
	switch rec.State {
	case journal.Planned:
		err = m.create(ctx, rec)
	case journal.Created:
		err = m.attach(ctx, rec)
	case journal.Attached:
		err = m.modify(ctx, rec)
	case journal.Releasing:
		err = m.release(ctx, rec)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		m.noteFailure(ctx, opID, err)
	}
	return err
}

func (m *Manager) tags(rec journal.ENI) []types.Tag {
	t := []types.Tag{
		{Key: aws.String(TagOwner), Value: aws.String(m.cfg.InstanceID)},
		{Key: aws.String(TagCreatedAt), Value: aws.String(rec.CreatedAt.UTC().Format(time.RFC3339))},
		{Key: aws.String(TagOpID), Value: aws.String(rec.OpID)},
	}
	if m.cfg.Cluster != "" {
		t = append(t, types.Tag{Key: aws.String(TagCluster), Value: aws.String(m.cfg.Cluster)})
	}
	if rec.GroupSet != "" {
		t = append(t, types.Tag{Key: aws.String(TagGroupSet), Value: aws.String(rec.GroupSet)})
	}
	return t
}

// createRequest is the operation's CreateNetworkInterface: its parameters come from the record, as planned,
// so that every replay of its ClientToken is the same request. Records of older builds carry no groups and
// tags: theirs come from the settings.
func (m *Manager) createRequest(rec journal.ENI) *ec2.CreateNetworkInterfaceInput {
	groups, tags := rec.SecurityGroups, m.tags(rec)
	if len(rec.Tags) > 0 {
		tags = tags[:0]
		for _, t := range rec.Tags {
			tags = append(tags, types.Tag{Key: aws.String(t.Key), Value: aws.String(t.Value)})
		}
	} else {
		groups = m.cfg.SecurityGroups
	}
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(rec.SubnetID),
		ClientToken: aws.String(rec.ClientToken),
		Description: aws.String("eniwire " + m.cfg.InstanceID),
		Groups:      groups,
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface, Tags: tags,
		}},
	}
	if rec.WantIPs > 0 {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(rec.WantIPs))
	}
	if rec.WantPrefixes > 0 {
		in.Ipv4PrefixCount = aws.Int32(int32(rec.WantPrefixes))
	}
	return in
}

func (m *Manager) create(ctx context.Context, rec journal.ENI) error {
	in := m.createRequest(rec)
	out, err := m.ec2.CreateNetworkInterface(ctx, in)
	if err != nil {
		err = ec2client.Classify("creating ENI for op "+rec.OpID, err)
		if !errors.Is(err, ec2client.ErrTransient) && !errors.Is(err, context.Canceled) && !errors.Is(err, ec2client.ErrNoPrefix) {
			// A definite refusal created nothing (a replay of the same token would have returned the ENI).
			// Should a lost earlier answer have created one after all, the GC finds it by its tags. A refused
			// prefix keeps its plan for the caller to drop (DropPlan) once it grows with single IPs, so that no
			// other plan for prefixes slips in between.
			if uerr := m.books.Update(ctx, func(st *journal.State) error { st.RemoveENI(rec.OpID); return nil }); uerr != nil {
				return errors.Join(err, uerr)
			}
			m.log.Warn("ENI create refused; plan dropped", "op", rec.OpID, "error", err)
		}
		return err
	}
	ni := out.NetworkInterface
	if ni == nil || ni.NetworkInterfaceId == nil {
		return fmt.Errorf("creating ENI for op %s: %w: answer without an ENI", rec.OpID, ec2client.ErrTransient)
	}
	reserved := false
	err = m.books.Update(ctx, func(st *journal.State) error {
		e := st.ENIByOp(rec.OpID)
		if e == nil {
			return nil
		}
		fillFromEC2(e, ni)
		forgetUnassigned(st, e.IPs)
		e.State = journal.Created
		e.Since = m.clock.Now()
		e.Attempts, e.LastError = 0, ""
		// The same record reserves the device index and marks the attach as possibly made, so the attach
		// that follows needs no write of its own; a replay reads EC2 before attaching, as for any tried one.
		if !m.NeedsReconcile() {
			if idx := m.freeDeviceIndex(st, e.ID); idx > 0 {
				e.AttachTried, e.DeviceIndex, reserved = true, idx, true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journaling created ENI %s: %w", aws.ToString(ni.NetworkInterfaceId), err)
	}
	m.noteAssigned(slotsOf(ni))
	if reserved {
		m.mu.Lock()
		m.fresh[rec.OpID] = true
		m.mu.Unlock()
	}
	m.log.Info("ENI created", "op", rec.OpID, "eni", aws.ToString(ni.NetworkInterfaceId), "ips", len(slotsOf(ni)))
	return nil
}

// fillFromEC2 copies what EC2 says about an ENI into its record; IPs are only ever added here, never removed,
// since an answer that lags must not make the books forget an address a pod may hold.
func fillFromEC2(e *journal.ENI, ni *types.NetworkInterface) {
	e.ID = aws.ToString(ni.NetworkInterfaceId)
	if mac := aws.ToString(ni.MacAddress); mac != "" {
		e.MAC = mac
	}
	if ip := aws.ToString(ni.PrivateIpAddress); ip != "" {
		e.PrimaryIP = ip
	}
	if s := aws.ToString(ni.SubnetId); s != "" {
		e.SubnetID = s
	}
	for _, ip := range slotsOf(ni) {
		if !slices.Contains(e.IPs, ip) {
			e.IPs = append(e.IPs, ip)
		}
	}
	if a := ni.Attachment; a != nil {
		e.AttachmentID = aws.ToString(a.AttachmentId)
		e.DeviceIndex = int(aws.ToInt32(a.DeviceIndex))
		e.DeleteOnTermination = aws.ToBool(a.DeleteOnTermination)
	}
}

// slotsOf returns the IPv4 slots EC2 lists on an ENI for pods: its secondary IPs and its /28 prefixes.
func slotsOf(ni *types.NetworkInterface) []string {
	var out []string
	for _, p := range ni.PrivateIpAddresses {
		if !aws.ToBool(p.Primary) && aws.ToString(p.PrivateIpAddress) != "" {
			out = append(out, aws.ToString(p.PrivateIpAddress))
		}
	}
	for _, p := range ni.Ipv4Prefixes {
		if s := aws.ToString(p.Ipv4Prefix); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// freeDeviceIndex returns the lowest device index neither EC2 nor the books use (reserved attaches included),
// or -1 when the ENI limit is reached. It runs inside a books update.
func (m *Manager) freeDeviceIndex(st *journal.State, self string) int {
	used := map[int]bool{0: true}
	m.mu.Lock()
	for idx, id := range m.occupied {
		if id != self {
			used[idx] = true
		}
	}
	m.mu.Unlock()
	for _, e := range st.ENIs {
		if e.ID != self && e.DeviceIndex > 0 && (e.Usable() || e.State == journal.Releasing || e.AttachTried) {
			used[e.DeviceIndex] = true
		}
	}
	if len(used) >= m.MaxENIs() {
		return -1
	}
	for i := 1; ; i++ {
		if !used[i] {
			return i
		}
	}
}

func (m *Manager) attach(ctx context.Context, rec journal.ENI) error {
	if m.NeedsReconcile() {
		return fmt.Errorf("attaching ENI %s: %w: waiting for a reconcile", rec.ID, ec2client.ErrBooksWrong)
	}
	m.mu.Lock()
	fresh := m.fresh[rec.OpID]
	delete(m.fresh, rec.OpID)
	m.mu.Unlock()
	if fresh && rec.AttachTried && rec.DeviceIndex > 0 {
		// Reserved by the create's record in this process, and no attach made since: attach at once.
		return m.attachAt(ctx, rec, rec.DeviceIndex)
	}
	if rec.AttachTried {
		// An earlier attach may have happened without our hearing of it: read EC2 before attaching again.
		ni, err := m.describeOne(ctx, rec.ID)
		if err != nil {
			return err
		}
		if ni == nil {
			return fmt.Errorf("attaching ENI %s: %w: not visible yet", rec.ID, ec2client.ErrTransient)
		}
		if a := ni.Attachment; a != nil && aws.ToString(a.InstanceId) == m.cfg.InstanceID {
			return m.markAttached(ctx, rec.OpID, ni)
		}
		if ni.Status != types.NetworkInterfaceStatusAvailable {
			return fmt.Errorf("attaching ENI %s: %w: status %s", rec.ID, ec2client.ErrTransient, ni.Status)
		}
	}
	// The index is chosen and reserved (AttachTried with its DeviceIndex) in one change of the books, so
	// concurrent attaches of one warm-up never pick the same one.
	idx := -1
	var inUse error
	err := m.books.Update(ctx, func(st *journal.State) error {
		e := st.ENIByOp(rec.OpID)
		if e == nil {
			return nil
		}
		idx = m.freeDeviceIndex(st, rec.ID)
		if idx < 0 {
			// No room. An ENI that pods use (detached behind our back, its slot taken by foreign ENIs) is never
			// deleted: EC2 would hand its addresses to others while the pods hold them. It waits for a slot.
			if inUse = heldBy(st, e.ID, m.clock.Now()); inUse != nil {
				return nil
			}
			// Nobody uses it, so deleting it is safe; the pool pauses its creates (ErrNoDeviceIndex).
			e.State, e.ReleaseStep, e.Since = journal.Releasing, journal.StepDelete, m.clock.Now()
			return nil
		}
		e.AttachTried, e.DeviceIndex = true, idx
		return nil
	})
	if err != nil {
		return fmt.Errorf("journaling attach of ENI %s: %w", rec.ID, err)
	}
	if inUse != nil {
		return fmt.Errorf("attaching ENI %s: no free device index, and it is not deleted: %w", rec.ID, inUse)
	}
	if idx < 0 {
		// Something holds a slot that the pool did not count: the reconcile counts it.
		m.RequestReconcile()
		m.log.Warn("no free ENI slot; deleting unattached ENI", "op", rec.OpID, "eni", rec.ID)
		return fmt.Errorf("attaching ENI %s: %w (the instance's %d ENI slots are taken); deleting it unattached",
			rec.ID, ErrNoDeviceIndex, m.MaxENIs())
	}
	return m.attachAt(ctx, rec, idx)
}

// attachAt calls AttachNetworkInterface at idx, which the record already holds as reserved and tried.
func (m *Manager) attachAt(ctx context.Context, rec journal.ENI, idx int) error {
	out, err := m.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		InstanceId: aws.String(m.cfg.InstanceID), NetworkInterfaceId: aws.String(rec.ID),
		DeviceIndex: aws.Int32(int32(idx)), NetworkCardIndex: aws.Int32(0),
	})
	if err != nil {
		if ec2client.IsThrottle(err) {
			// EC2 refused the call without applying it, so the retry needs no Describe first; under account
			// pressure that Describe is the call that starves. Should an earlier attempt of the same call
			// have been applied unheard (the SDK retries transport errors), the retry at the same index gets
			// a definite "in use" refusal, which sends the node to reconcile: nothing is attached twice.
			// In memory only: after a crash the replay reads EC2 first, as for any tried attach.
			m.mu.Lock()
			m.fresh[rec.OpID] = true
			m.mu.Unlock()
		}
		err = ec2client.Classify(fmt.Sprintf("attaching ENI %s at device index %d", rec.ID, idx), err)
		if code := ec2client.ErrorCode(err); code == ec2client.CodeAttachmentLimitExceeded ||
			code == ec2client.CodeInvalidParameterValue || code == ec2client.CodeENIInUse {
			// Our count is wrong: something is attached that the books do not know. Reconcile; never loop.
			m.mu.Lock()
			m.needReconcile = true
			if code == ec2client.CodeAttachmentLimitExceeded {
				// The limit EC2 enforces is what is attached now; only the reconcile can count that.
				m.capAtReconcile = true
			}
			m.mu.Unlock()
			return fmt.Errorf("%w: %w", ec2client.ErrBooksWrong, err)
		}
		return err
	}
	now := m.clock.Now()
	err = m.updateENI(ctx, rec.OpID, func(e *journal.ENI) {
		e.AttachmentID = aws.ToString(out.AttachmentId)
		e.State, e.Since, e.Attempts, e.LastError = journal.Attached, now, 0, ""
	})
	if err != nil {
		return fmt.Errorf("journaling attachment of ENI %s: %w", rec.ID, err)
	}
	m.mu.Lock()
	m.occupied[idx] = rec.ID
	m.mu.Unlock()
	m.log.Info("ENI attached", "op", rec.OpID, "eni", rec.ID, "deviceIndex", idx, "attachment", aws.ToString(out.AttachmentId))
	return nil
}

func (m *Manager) markAttached(ctx context.Context, opID string, ni *types.NetworkInterface) error {
	now := m.clock.Now()
	err := m.updateENI(ctx, opID, func(e *journal.ENI) {
		fillFromEC2(e, ni)
		e.State, e.Since, e.Attempts, e.LastError = journal.Attached, now, 0, ""
		if e.DeleteOnTermination {
			e.State = journal.Ready
		}
	})
	if err != nil {
		return fmt.Errorf("journaling attachment of ENI %s: %w", aws.ToString(ni.NetworkInterfaceId), err)
	}
	m.log.Info("ENI found attached", "op", opID, "eni", aws.ToString(ni.NetworkInterfaceId))
	return nil
}

// modify sets DeleteOnTermination. A failure leaves the ENI attached, in the books and usable; the pool manager
// calls again later until it holds.
func (m *Manager) modify(ctx context.Context, rec journal.ENI) error {
	_, err := m.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(rec.ID),
		Attachment: &types.NetworkInterfaceAttachmentChanges{
			AttachmentId: aws.String(rec.AttachmentID), DeleteOnTermination: aws.Bool(true),
		},
	})
	if err != nil {
		err = ec2client.Classify("setting DeleteOnTermination on ENI "+rec.ID, err)
		if errors.Is(err, ec2client.ErrBooksWrong) {
			m.RequestReconcile()
		}
		return err
	}
	err = m.updateENI(ctx, rec.OpID, func(e *journal.ENI) {
		if e.State == journal.Attached {
			e.State, e.DeleteOnTermination, e.Since, e.Attempts, e.LastError = journal.Ready, true, m.clock.Now(), 0, ""
		}
	})
	if err != nil {
		return fmt.Errorf("journaling DeleteOnTermination of ENI %s: %w", rec.ID, err)
	}
	m.log.Info("ENI ready", "op", rec.OpID, "eni", rec.ID)
	return nil
}
