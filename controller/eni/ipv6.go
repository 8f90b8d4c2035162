package eni

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
)

// EnsureIPv6Prefix makes the books hold an IPv6 /80 of the usable ENI eniID (ENABLE_IPv6: the primary), as
// the AWS VPC CNI takes it: one AssignIpv6Addresses with Ipv6PrefixCount=1, journaled before the call as
// every assign is (assignJournaled). It takes a /80 only when none can be had otherwise, so that no crash and
// no lost answer ever makes the node take a second one: it reports false with nothing to do when the books
// hold one; while an assign of unknown outcome is journaled, it settles it first (ResumeIPOps reads the ENI
// from EC2); when the books hold none (a first start, or a journal lost), it reads the ENI from EC2 and adopts
// the /80s it already holds. It reports whether the books changed.
func (m *Manager) EnsureIPv6Prefix(ctx context.Context, eniID string) (bool, error) {
	var held, pending bool
	m.books.View(func(st *journal.State) {
		if e := st.ENIByID(eniID); e != nil {
			held = len(e.IPv6Prefixes) > 0
		}
		pending = slices.ContainsFunc(st.IPOps, func(op journal.IPOp) bool { return op.IPv6 && op.ENI == eniID })
	})
	switch {
	case held:
		return m.releaseSurplusIPv6(ctx, eniID)
	case pending:
		if err := m.ResumeIPOps(ctx); err != nil {
			return false, err
		}
		// Settled: the pool looks again at once. Still pending (an assign whose /80 a lagging Describe does not
		// show yet): the next round reads it again.
		return !m.ipv6AssignPending(eniID), nil
	}
	ni, err := m.describeOne(ctx, eniID)
	if err != nil {
		return false, err
	}
	if ni != nil && len(ni.Ipv6Prefixes) > 0 {
		err := m.books.Update(ctx, func(st *journal.State) error {
			if e := st.ENIByID(eniID); e != nil {
				m.adoptIPv6Prefixes(st, e, ni)
			}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("journaling the IPv6 prefixes of ENI %s: %w", eniID, err)
		}
		m.log.Info("IPv6 prefix found on the ENI and adopted", "eni", eniID, "prefixes", ipv6PrefixesOf(ni))
		return true, nil
	}
	op := journal.IPOp{OpID: NewOpID(), Kind: journal.AssignIPs, ENI: eniID, Count: 1, IPv6: true, Since: m.clock.Now()}
	prefixes, err := m.assignJournaled(ctx, op, "an IPv6 /80 prefix", func(ctx context.Context, once func(*ec2.Options)) ([]string, error) {
		out, err := m.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eniID),
			Ipv6PrefixCount: aws.Int32(1)}, once)
		if err != nil {
			return nil, err
		}
		return out.AssignedIpv6Prefixes, nil
	}, func(_ *journal.State, e *journal.ENI, prefixes []string) {
		for _, p := range prefixes {
			if !slices.Contains(e.IPv6Prefixes, p) {
				e.IPv6Prefixes = append(e.IPv6Prefixes, p)
			}
		}
	})
	if err != nil {
		return false, err
	}
	m.noteAssigned(prefixes) // a Describe that lags and lacks it is no removal made outside (staleips.go)
	m.log.Info("IPv6 prefix assigned to ENI", "eni", eniID, "prefixes", prefixes)
	return true, nil
}

// ipv6AssignPending reports whether an IPv6 assign of eniID is in the journal, its outcome not known yet.
func (m *Manager) ipv6AssignPending(eniID string) bool {
	pending := false
	m.books.View(func(st *journal.State) {
		pending = slices.ContainsFunc(st.IPOps, func(op journal.IPOp) bool { return op.IPv6 && op.ENI == eniID && op.Kind == journal.AssignIPs })
	})
	return pending
}

// adoptIPv6Prefixes puts in the books every /80 EC2 shows on the ENI but one an unassign is taking away and
// one our own unassign took lately (a Describe that lags still lists it). It runs inside a books update.
func (m *Manager) adoptIPv6Prefixes(st *journal.State, e *journal.ENI, ni *types.NetworkInterface) {
	leaving := leavingIPs(st, e.ID)
	now := m.clock.Now()
	for _, p := range ipv6PrefixesOf(ni) {
		if !slices.Contains(e.IPv6Prefixes, p) && !leaving[p] && !m.unassignedRecently(st, p, now) {
			e.IPv6Prefixes = append(e.IPv6Prefixes, p)
		}
	}
}

// ipv6PrefixesOf lists the /80s EC2 shows on an ENI.
func ipv6PrefixesOf(ni *types.NetworkInterface) []string {
	var out []string
	for _, p := range ni.Ipv6Prefixes {
		if s := aws.ToString(p.Ipv6Prefix); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// releaseSurplusIPv6 gives back the /80s of eniID beyond the one IPv6 mode holds (a second one found on the
// ENI and adopted: taken by an earlier agent, or by hand) when no pod holds an address of them and none cools
// down: UnassignIpv6Addresses, journaled first; they leave the books with the op, so no pod gets one
// meanwhile. It reports whether it gave any back.
func (m *Manager) releaseSurplusIPv6(ctx context.Context, eniID string) (bool, error) {
	// Most rounds find the one /80 and nothing to release: an update would journal (and fsync) an empty record
	// each round, 60 a minute at a 1 s pool interval.
	surplus := false
	m.books.View(func(st *journal.State) {
		e := st.ENIByID(eniID)
		surplus = e != nil && len(e.IPv6Prefixes) >= 2
	})
	if !surplus {
		return false, nil
	}
	var op journal.IPOp
	err := m.books.Update(ctx, func(st *journal.State) error {
		e := st.ENIByID(eniID)
		if e == nil || len(e.IPv6Prefixes) < 2 {
			return nil
		}
		var busy, idle []string
		for _, s := range e.IPv6Prefixes {
			if ipv6PrefixInUse(st, s) {
				busy = append(busy, s)
			} else {
				idle = append(idle, s)
			}
		}
		if len(busy) == 0 {
			busy, idle = idle[:1], idle[1:] // keep one
		}
		if len(idle) == 0 {
			return nil
		}
		op = journal.IPOp{OpID: NewOpID(), Kind: journal.UnassignIPs, ENI: eniID, IPv6: true, IPs: idle, Since: m.clock.Now()}
		e.IPv6Prefixes = busy
		st.IPOps = append(st.IPOps, op)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("journaling the release of surplus IPv6 prefixes of ENI %s: %w", eniID, err)
	}
	if op.OpID == "" {
		return false, nil
	}
	return true, m.unassignIPv6(ctx, op)
}

// ipv6PrefixInUse reports whether a pod holds an address of the /80 s or one of its addresses cools down.
func ipv6PrefixInUse(st *journal.State, s string) bool {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return true // not ours to judge: keep it
	}
	in := func(ip string) bool { a, err := netip.ParseAddr(ip); return err == nil && p.Contains(a) }
	return slices.ContainsFunc(st.Assignments, func(a journal.Assignment) bool { return in(a.IP) }) ||
		slices.ContainsFunc(st.Cooldowns, func(c journal.Cooldown) bool { return in(c.IP) })
}

// unassignIPv6 sends a journaled unassign of /80s and settles it: done (or the ENI gone), the op goes; a
// transient failure keeps it for ResumeIPOps; a refusal reads the ENI, and the /80s EC2 still shows on it
// return to the books.
func (m *Manager) unassignIPv6(ctx context.Context, op journal.IPOp) error {
	_, err := m.ec2.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(op.ENI), Ipv6Prefixes: op.IPs})
	var back []string
	if err != nil && ec2client.ErrorCode(err) != ec2client.CodeENINotFound {
		err = ec2client.Classify(fmt.Sprintf("unassigning the IPv6 prefixes %v from ENI %s", op.IPs, op.ENI), err)
		if errors.Is(err, ec2client.ErrTransient) || errors.Is(err, context.Canceled) {
			return err
		}
		ni, derr := m.describeOne(ctx, op.ENI)
		if derr != nil {
			return errors.Join(err, derr)
		}
		if ni != nil {
			back = slices.DeleteFunc(ipv6PrefixesOf(ni), func(p string) bool { return !slices.Contains(op.IPs, p) })
		}
	} else {
		err = nil
	}
	uerr := m.books.Update(ctx, func(st *journal.State) error {
		if e := st.ENIByID(op.ENI); e != nil {
			e.IPv6Prefixes = append(e.IPv6Prefixes, back...)
		}
		// What left is remembered as our own unassign, so that a Describe that lags does not bring it back.
		m.rememberUnassigned(st, op.ENI, slices.DeleteFunc(slices.Clone(op.IPs), func(p string) bool { return slices.Contains(back, p) }))
		st.IPOps = slices.DeleteFunc(st.IPOps, func(o journal.IPOp) bool { return o.OpID == op.OpID })
		return nil
	})
	if uerr != nil {
		return errors.Join(err, fmt.Errorf("journaling the released IPv6 prefixes of ENI %s: %w", op.ENI, uerr))
	}
	if err == nil {
		m.log.Info("surplus IPv6 prefixes released from ENI", "eni", op.ENI, "prefixes", op.IPs)
	}
	return err
}
