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

// Report is what one reconcile found.
type Report struct {
	// Attached is the number of ENIs EC2 shows attached to the instance, primary included.
	Attached int
	// Foreign are ENIs attached by someone else (no owner tag of ours); they are left alone.
	Foreign []string
	// Adopted are ENIs with our tags that the books did not hold (or held as an unfinished op).
	Adopted []string
	// Collected are our available ENIs older than the grace period that were deleted.
	Collected []string
	// Detached are books ENIs that EC2 shows available: they go back to be attached again.
	Detached []string
	// Vanished are books ENIs EC2 confirms do not exist any more.
	Vanished []string
	// Moved are books ENIs EC2 shows attached to another instance: out of use (journal.Moved while pods
	// hold their IPs, which are in LostPodIPs), or forgotten.
	Moved []string
	// IMDSMissing are usable ENIs IMDS does not show yet (lag; informational only).
	IMDSMissing []string
	// GoneIPs are free IPs EC2 confirmed no longer on their ENI (unassigned outside eniwire): they left the
	// books. LostPodIPs are IPs pods hold that EC2 no longer lists, or whose ENI it shows attached to another
	// instance: they stay with their pods, reported.
	GoneIPs    []string
	LostPodIPs []string
}

// Quiet reports whether the reconcile found the books and EC2 agreeing: nothing adopted, collected, detached,
// vanished, moved or lost. ENIs attached by others are left alone, so they do not count.
func (r Report) Quiet() bool {
	return len(r.Adopted)+len(r.Collected)+len(r.Detached)+len(r.Vanished)+len(r.Moved)+len(r.GoneIPs)+len(r.LostPodIPs) == 0
}

func tagValue(ni *types.NetworkInterface, key string) string {
	for _, t := range ni.TagSet {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// groupIDsOf returns the security group ids EC2 lists on an ENI, sorted.
func groupIDsOf(ni *types.NetworkInterface) []string {
	var out []string
	for _, g := range ni.Groups {
		out = append(out, aws.ToString(g.GroupId))
	}
	slices.Sort(out)
	return out
}

// Reconcile compares the books with EC2 (and IMDS, which only informs): it adopts attached ENIs carrying our
// tags, finishes records whose answers were lost, notes ENIs attached by others, sends unfinished ENIs back to
// be attached, and deletes our own available ENIs that nobody holds once they are older than GCGrace.
func (m *Manager) Reconcile(ctx context.Context) (Report, error) {
	var rep Report
	attached, err := m.describeFiltered(ctx, filter("attachment.instance-id", m.cfg.InstanceID))
	if err != nil {
		return rep, err
	}
	var mine []types.NetworkInterface
	listedOwn := m.ownAvailableDue(attached)
	if listedOwn {
		if mine, err = m.describeFiltered(ctx, filter("tag:"+TagOwner, m.cfg.InstanceID), filter("status", "available")); err != nil {
			return rep, err
		}
	}
	rep.Attached = len(attached)
	now := m.clock.Now()
	m.forgetOldOwnIPs(now)
	suspects := map[string][]string{}
	seen := map[string]*types.NetworkInterface{}
	occupied := map[int]string{}
	var gc []string
	err = m.books.Update(ctx, func(st *journal.State) error {
		m.forgetOldUnassigned(st, now)
		for i := range attached {
			ni := &attached[i]
			id := aws.ToString(ni.NetworkInterfaceId)
			seen[id] = ni
			if ni.Attachment != nil {
				occupied[int(aws.ToInt32(ni.Attachment.DeviceIndex))] = id
			}
			m.reconcileAttached(st, ni, now, &rep, suspects)
		}
		for i := range mine {
			ni := &mine[i]
			id := aws.ToString(ni.NetworkInterfaceId)
			if seen[id] != nil || ni.Attachment != nil && ni.Attachment.InstanceId != nil {
				continue
			}
			seen[id] = ni
			rec := st.ENIByID(id)
			if rec == nil {
				rec = st.ENIByOp(tagValue(ni, TagOpID))
			}
			switch {
			case rec == nil:
				created, perr := time.Parse(time.RFC3339, tagValue(ni, TagCreatedAt))
				if perr == nil && now.Sub(created) > m.cfg.GCGrace {
					gc = append(gc, id)
				}
			case rec.State == journal.Planned:
				// The create happened but its answer was lost.
				fillFromEC2(rec, ni)
				rec.State, rec.Since = journal.Created, now
				rep.Adopted = append(rep.Adopted, id)
			case (rec.Usable() || rec.State == journal.Moved) && now.Sub(rec.Since) > m.cfg.VisibilityGrace:
				// Detached behind our back (or from the instance it was moved to): attach it again. Its IPs
				// stay in the books.
				rec.State, rec.AttachmentID, rec.AttachTried, rec.DeleteOnTermination, rec.Since = journal.Created, "", false, false, now
				rep.Detached = append(rep.Detached, id)
			}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("journaling reconcile: %w", err)
	}
	m.mu.Lock()
	m.occupied = occupied
	m.needReconcile = false
	m.ownListOwed = m.ownListOwed && !listedOwn
	m.reconciles++
	m.learnLimitLocked(len(occupied), now)
	foreign := make(map[string]bool, len(rep.Foreign))
	for _, id := range rep.Foreign {
		foreign[id] = true
		if !m.foreign[id] {
			m.log.Warn("ENI attached by someone else; leaving it alone (it takes one of the instance's ENI slots)", "eni", id)
		}
	}
	m.foreign = foreign
	m.mu.Unlock()
	for _, id := range rep.Adopted {
		m.log.Info("ENI adopted", "eni", id)
	}

	var errs []error
	errs = append(errs, m.confirmMissing(ctx, seen, now, &rep))
	errs = append(errs, m.confirmGoneIPs(ctx, suspects, &rep))
	for _, id := range gc {
		_, err := m.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
		if err != nil && ec2client.ErrorCode(err) != ec2client.CodeENINotFound {
			errs = append(errs, ec2client.Classify("collecting leaked ENI "+id, err))
			continue
		}
		rep.Collected = append(rep.Collected, id)
		m.log.Info("leaked ENI collected", "eni", id)
	}
	errs = append(errs, m.ResumeIPOps(ctx))
	m.compareIMDS(ctx, &rep)
	return rep, errors.Join(errs...)
}

// ownAvailableEvery: one reconcile in this many lists our available ENIs even when nothing points at one.
const ownAvailableEvery = 10

// ownAvailableDue says whether the reconcile also lists the instance's own available ENIs (a second
// DescribeNetworkInterfaces). They come only from an ENI operation of ours not finished (a create whose answer
// was lost, an ENI between detach and delete: each settled by its own operation), from an ENI detached behind
// our back, or from books lost with the journal: so the list is read at the first reconcile, when a surprising
// answer asked for the reconcile, when a usable ENI of the books is missing from attached or one was moved,
// and otherwise one reconcile in ownAvailableEvery. (Two calls at every periodic reconcile were the most of a
// 1,000-node fleet's describes.) Books with no ENI at all (a new instance) hold no operation to finish, and
// every pod of the node waits for its first reconcile while a rollout's nodes all start together and share the
// account's describe bucket: their first reconcile leaves the list, which only a journal lost on this instance
// could fill, to the next.
func (m *Manager) ownAvailableDue(attached []types.NetworkInterface) bool {
	m.mu.Lock()
	first := m.reconciles == 0 && !m.needReconcile
	due := m.reconciles%ownAvailableEvery == 0 || m.needReconcile || m.ownListOwed
	m.mu.Unlock()
	if first {
		empty := false
		m.books.View(func(st *journal.State) { empty = len(st.ENIs) == 0 })
		if empty {
			m.mu.Lock()
			m.ownListOwed = true
			m.mu.Unlock()
			return false
		}
	}
	if due {
		return true
	}
	listed := make(map[string]bool, len(attached))
	for i := range attached {
		listed[aws.ToString(attached[i].NetworkInterfaceId)] = true
	}
	m.books.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			// An ENI whose create or attach is under way is settled by its own operation (its ClientToken, a
			// Describe of it); one that should be attached and is not, or was moved, is looked for.
			if !e.Primary && (e.State == journal.Moved || e.Usable() && !listed[e.ID]) {
				due = true
				return
			}
		}
	})
	return due
}

// reconcileAttached folds one ENI EC2 shows attached to us into the books, and notes in suspects the books'
// IPs of it that EC2 did not list.
func (m *Manager) reconcileAttached(st *journal.State, ni *types.NetworkInterface, now time.Time, rep *Report, suspects map[string][]string) {
	id := aws.ToString(ni.NetworkInterfaceId)
	primary := ni.Attachment != nil && aws.ToInt32(ni.Attachment.DeviceIndex) == 0
	rec := st.ENIByID(id)
	if rec == nil {
		if op := tagValue(ni, TagOpID); op != "" {
			rec = st.ENIByOp(op)
		}
	}
	if rec == nil {
		if !primary && tagValue(ni, TagOwner) != m.cfg.InstanceID {
			rep.Foreign = append(rep.Foreign, id)
			return
		}
		opID := tagValue(ni, TagOpID)
		if opID == "" {
			opID = "adopted-" + id
		}
		created, _ := time.Parse(time.RFC3339, tagValue(ni, TagCreatedAt))
		st.ENIs = append(st.ENIs, journal.ENI{OpID: opID, State: journal.Attached, Primary: primary, Adopted: !primary,
			CreatedAt: created, Since: now, GroupSet: tagValue(ni, TagGroupSet)})
		if rec := &st.ENIs[len(st.ENIs)-1]; rec.GroupSet != "" {
			rec.SecurityGroups = groupIDsOf(ni)
		}
		rec = &st.ENIs[len(st.ENIs)-1]
		if !primary {
			rep.Adopted = append(rep.Adopted, id)
		}
	}
	ips := slices.Clone(rec.IPs)
	fillFromEC2(rec, ni)
	rec.IPs = ips
	m.fillIPs(rec, slotsOf(ni), st)
	if len(rec.IPv6Prefixes) > 0 {
		// An ENI whose /80s the node uses: a /80 EC2 shows beside them (one an assign whose answer was lost
		// took, while a lagging Describe hid it) joins the books, and the pool gives back what it does not need.
		m.adoptIPv6Prefixes(st, rec, ni)
	}
	if gone := m.unlisted(rec, listedSlots(ni), st); len(gone) > 0 {
		suspects[id] = gone
	}
	if rec.SubnetCIDR == "" {
		rec.SubnetCIDR = m.subnetCIDR(rec.SubnetID)
	}
	switch rec.State {
	case journal.Planned, journal.Created, journal.Moved:
		if rec.State == journal.Moved {
			rec.LastError = "" // back on this instance
		}
		rec.State, rec.Since = journal.Attached, now
		if rec.ID != id {
			rec.ID = id
		}
		rep.Adopted = append(rep.Adopted, id)
	}
	if rec.State == journal.Attached && (rec.DeleteOnTermination || primary) {
		rec.State = journal.Ready
	}
	if rec.State == journal.Ready && !rec.DeleteOnTermination && !primary {
		rec.State = journal.Attached // someone cleared it: the modify is retried
	}
	rec.Primary = primary
}

// confirmMissing asks EC2 about books ENIs neither listing showed. Only EC2's word removes an ENI.
func (m *Manager) confirmMissing(ctx context.Context, seen map[string]*types.NetworkInterface, now time.Time, rep *Report) error {
	var check []journal.ENI
	m.books.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			// A moved ENI is asked about at every reconcile: its pods are reported each time, and it is
			// forgotten as soon as the last of them goes.
			if e.ID != "" && seen[e.ID] == nil && e.State != journal.Releasing &&
				(now.Sub(e.Since) > m.cfg.VisibilityGrace || e.State == journal.Moved) {
				check = append(check, e)
			}
		}
	})
	var errs []error
	for _, rec := range check {
		ni, err := m.describeOne(ctx, rec.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ni != nil {
			if a := ni.Attachment; a != nil && aws.ToString(a.InstanceId) != m.cfg.InstanceID && aws.ToString(a.InstanceId) != "" {
				errs = append(errs, m.takeMoved(ctx, rec, aws.ToString(a.InstanceId), rep))
			}
			continue
		}
		err = m.books.Update(ctx, func(st *journal.State) error {
			for _, a := range st.Assignments {
				if a.ENI == rec.ID {
					m.log.Error("ENI holding pods no longer exists in EC2; keeping its assignments", "eni", rec.ID)
					return nil
				}
			}
			st.RemoveENI(rec.OpID)
			st.Cooldowns = dropENI(st.Cooldowns, rec.ID)
			rep.Vanished = append(rep.Vanished, rec.ID)
			return nil
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (m *Manager) compareIMDS(ctx context.Context, rep *Report) {
	if m.imds == nil {
		return
	}
	macs, err := m.imds.ENIMACs(ctx)
	if err != nil {
		m.log.Debug("reading ENIs from IMDS", "error", err)
		return
	}
	m.books.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.Usable() && e.MAC != "" && !slices.Contains(macs, e.MAC) {
				rep.IMDSMissing = append(rep.IMDSMissing, e.ID)
			}
		}
	})
}
