package eni

// The books' secondary IPs against EC2's lists. EC2 is eventually consistent: right after our own assign a
// Describe may not list the new IPs yet, and right after our own unassign it may still list the old ones. So
// the reconcile adds what EC2 lists except our recent unassigns (journaled, so a restart within the lag
// remembers them), and removes what EC2 no longer lists only
// when the IP is not one of our recent assigns and a second read, by ENI id, confirms it is gone.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/journal"
)

// noteAssigned remembers IPs our own call just added to an ENI, so that a Describe that lags and does not list
// them yet is not taken for an unassign made outside. (A restart forgets them: the second read by ENI id that
// confirmGoneIPs makes before removing an IP then decides.)
func (m *Manager) noteAssigned(ips []string) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ip := range ips {
		m.addedAt[ip] = now
	}
}

// recent reports whether at is within the visibility grace of now.
func (m *Manager) recent(at time.Time, now time.Time) bool {
	return now.Sub(at) < m.cfg.VisibilityGrace
}

// forgetOldOwnIPs drops remembered assigns older than the visibility grace.
func (m *Manager) forgetOldOwnIPs(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ip, at := range m.addedAt {
		if !m.recent(at, now) {
			delete(m.addedAt, ip)
		}
	}
}

// rememberUnassigned journals the slots our own unassign just took from eniID, inside the books update that
// takes them out of the books: a Describe that lags still lists them, and the memory must survive a restart
// of the agent within that lag, or the new process would take them back into the pool on one stale listing.
func (m *Manager) rememberUnassigned(st *journal.State, eniID string, slots []string) {
	now := m.clock.Now()
	forgetUnassigned(st, slots)
	for _, ip := range slots {
		st.Unassigned = append(st.Unassigned, journal.Unassigned{IP: ip, ENI: eniID, At: now})
	}
}

// forgetUnassigned drops the journaled unassigns of slots (our own assign brought them back).
func forgetUnassigned(st *journal.State, slots []string) {
	st.Unassigned = slices.DeleteFunc(st.Unassigned, func(u journal.Unassigned) bool { return slices.Contains(slots, u.IP) })
}

// forgetOldUnassigned drops the journaled unassigns older than the visibility grace: Describe no longer lists
// them. It runs inside a books update.
func (m *Manager) forgetOldUnassigned(st *journal.State, now time.Time) {
	st.Unassigned = slices.DeleteFunc(st.Unassigned, func(u journal.Unassigned) bool { return !m.recent(u.At, now) })
}

// unassignedRecently reports whether our own unassign took ip within the visibility grace (st: the books).
func (m *Manager) unassignedRecently(st *journal.State, ip string, now time.Time) bool {
	return slices.ContainsFunc(st.Unassigned, func(u journal.Unassigned) bool { return u.IP == ip && m.recent(u.At, now) })
}

// fillIPs adds EC2's addresses that the books miss, leaving out the ones an unassign is taking away and the
// ones our own recent unassign took away (a Describe that lags still lists them). It runs inside a books
// update.
func (m *Manager) fillIPs(e *journal.ENI, ec2IPs []string, st *journal.State) {
	leaving := leavingIPs(st, e.ID)
	now := m.clock.Now()
	for _, ip := range ec2IPs {
		if !slices.Contains(e.IPs, ip) && !leaving[ip] && !m.unassignedRecently(st, ip, now) {
			e.IPs = append(e.IPs, ip)
		}
	}
}

func leavingIPs(st *journal.State, eniID string) map[string]bool {
	leaving := map[string]bool{}
	for _, op := range st.IPOps {
		if op.Kind == journal.UnassignIPs && op.ENI == eniID {
			for _, ip := range op.IPs {
				leaving[ip] = true
			}
		}
	}
	return leaving
}

// listedSlots are the slots EC2 shows on an ENI: its secondary IPs and IPv4 prefixes (slotsOf), and its IPv6
// /80s.
func listedSlots(ni *types.NetworkInterface) []string {
	return append(slotsOf(ni), ipv6PrefixesOf(ni)...)
}

// unlisted returns the books' slots of e (its IPs and its IPv6 /80s) that EC2's list (listedSlots) does not
// show, leaving out our own recent assigns (a Describe that lags does not list them yet) and slots an unassign
// is taking away. It runs inside a books update.
func (m *Manager) unlisted(e *journal.ENI, ec2IPs []string, st *journal.State) []string {
	leaving := leavingIPs(st, e.ID)
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, ip := range slices.Concat(e.IPs, e.IPv6Prefixes) {
		at, ok := m.addedAt[ip]
		if !slices.Contains(ec2IPs, ip) && !leaving[ip] && !(ok && m.recent(at, now)) {
			out = append(out, ip)
		}
	}
	return out
}

// confirmGoneIPs reads each ENI whose IPs the list lacked by its id, and removes from the books the IPs that
// read confirms gone. An IP a pod holds stays with its pod and is reported: the pod's traffic is broken and
// only an operator (or the pod's deletion) can end that. An IPv6 /80 confirmed gone leaves the books even while
// pods hold addresses of it (they are reported): new pods must not get more of its addresses, and the pool
// takes another /80 for them.
func (m *Manager) confirmGoneIPs(ctx context.Context, suspects map[string][]string, rep *Report) error {
	var errs []error
	for eniID, ips := range suspects {
		ni, err := m.describeOne(ctx, eniID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ni == nil {
			continue // the ENI itself is gone: confirmMissing's business
		}
		listed := listedSlots(ni)
		var gone, held []string
		err = m.books.Update(ctx, func(st *journal.State) error {
			gone, held = nil, nil
			e := st.ENIByID(eniID)
			if e == nil {
				return nil
			}
			for _, ip := range ips {
				slash80 := slices.Contains(e.IPv6Prefixes, ip)
				if slices.Contains(listed, ip) || !slices.Contains(e.IPs, ip) && !slash80 {
					continue
				}
				if slices.ContainsFunc(st.Assignments, func(a journal.Assignment) bool { return journal.Covers(ip, a.IP) || journal.Covers(ip, a.IPv6) }) {
					held = append(held, ip)
					if !slash80 {
						continue
					}
				}
				gone = append(gone, ip)
			}
			e.IPs = slices.DeleteFunc(e.IPs, func(ip string) bool { return slices.Contains(gone, ip) })
			e.IPv6Prefixes = slices.DeleteFunc(e.IPv6Prefixes, func(p string) bool { return slices.Contains(gone, p) })
			st.Cooldowns = slices.DeleteFunc(st.Cooldowns, func(c journal.Cooldown) bool { return journal.CoveredBy(gone, c.IP) })
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("journaling IPs gone from ENI %s: %w", eniID, err))
			continue
		}
		if len(gone) > 0 {
			rep.GoneIPs = append(rep.GoneIPs, gone...)
			m.log.Warn("IPs unassigned outside eniwire; removed from the pool", "eni", eniID, "ips", gone)
		}
		m.reportHeld(eniID, held, rep)
	}
	return errors.Join(errs...)
}

// reportHeld reports, once per IP, pods whose IP EC2 no longer lists on their ENI.
func (m *Manager) reportHeld(eniID string, held []string, rep *Report) {
	rep.LostPodIPs = append(rep.LostPodIPs, held...)
	m.mu.Lock()
	var fresh []string
	for _, ip := range held {
		if !m.lostReported[ip] {
			m.lostReported[ip] = true
			fresh = append(fresh, ip)
		}
	}
	m.mu.Unlock()
	if len(fresh) > 0 {
		m.log.Error("EC2 no longer lists IPs that pods hold; their traffic is broken, and the pods keep them until deleted",
			"eni", eniID, "ips", fresh)
	}
}
