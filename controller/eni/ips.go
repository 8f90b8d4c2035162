package eni

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
)

// AssignIPs adds n secondary IPs to the usable ENI eniID. The operation is journaled before the call; if the
// answer is lost, ResumeIPOps reads the ENI's addresses from EC2.
func (m *Manager) AssignIPs(ctx context.Context, eniID string, n int) error {
	return m.assign(ctx, eniID, n, false)
}

// AssignPrefixes adds n /28 prefixes to the usable ENI eniID, journaled and resolved as AssignIPs is. A
// fragmented subnet refuses with ec2client.ErrNoPrefix.
func (m *Manager) AssignPrefixes(ctx context.Context, eniID string, n int) error {
	return m.assign(ctx, eniID, n, true)
}

func (m *Manager) assign(ctx context.Context, eniID string, n int, prefixes bool) error {
	what := fmt.Sprintf("%d IPs", n)
	in := &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID)}
	if prefixes {
		what = fmt.Sprintf("%d prefixes", n)
		in.Ipv4PrefixCount = aws.Int32(int32(n))
	} else {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(n))
	}
	op := journal.IPOp{OpID: NewOpID(), Kind: journal.AssignIPs, ENI: eniID, Count: n, Prefixes: prefixes, Since: m.clock.Now()}
	ips, err := m.assignJournaled(ctx, op, what, func(ctx context.Context, once func(*ec2.Options)) ([]string, error) {
		out, err := m.ec2.AssignPrivateIpAddresses(ctx, in, once)
		if err != nil {
			return nil, err
		}
		var ips []string
		for _, a := range out.AssignedPrivateIpAddresses {
			ips = append(ips, aws.ToString(a.PrivateIpAddress))
		}
		for _, p := range out.AssignedIpv4Prefixes {
			ips = append(ips, aws.ToString(p.Ipv4Prefix))
		}
		return ips, nil
	}, func(st *journal.State, e *journal.ENI, ips []string) {
		for _, ip := range ips {
			if !slices.Contains(e.IPs, ip) {
				e.IPs = append(e.IPs, ip)
			}
		}
		forgetUnassigned(st, ips)
	})
	if err != nil {
		return err
	}
	m.noteAssigned(ips)
	m.log.Info("IPs assigned to ENI", "eni", eniID, "count", len(ips), "prefixes", prefixes)
	return nil
}

// assignJournaled is the two-phase commit of an assign, whatever it assigns: op is journaled (durably) before
// send makes the EC2 call, which it makes once (the once option: a count is not idempotent, so a call that
// may have been applied is never sent again blindly, by the SDK or anyone); the slots EC2 answered are then
// recorded on the ENI (record, inside the books update that drops op) and returned. An answer that may have
// been applied (a 5xx, a timeout, a lost connection, the caller's end) leaves op journaled, and ResumeIPOps
// reads the ENI from EC2 before the ENI gets more; a definite refusal drops op (and asks for a reconcile
// when the books are wrong). Errors are classified (ec2client.Classify).
func (m *Manager) assignJournaled(ctx context.Context, op journal.IPOp, what string,
	send func(ctx context.Context, once func(*ec2.Options)) ([]string, error),
	record func(st *journal.State, e *journal.ENI, slots []string)) ([]string, error) {
	if err := m.books.Update(ctx, func(st *journal.State) error { st.IPOps = append(st.IPOps, op); return nil }); err != nil {
		return nil, fmt.Errorf("journaling assignment of %s on ENI %s: %w", what, op.ENI, err)
	}
	slots, err := send(ctx, func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		if ec2client.MayHaveApplied(err) || errors.Is(err, context.Canceled) {
			// Unknown, not refused: the op stays journaled, and ResumeIPOps reads EC2 before the ENI gets more.
			return nil, ec2client.Classify(fmt.Sprintf("assigning %s to ENI %s (outcome unknown)", what, op.ENI), err)
		}
		err = ec2client.Classify(fmt.Sprintf("assigning %s to ENI %s", what, op.ENI), err)
		if errors.Is(err, ec2client.ErrBooksWrong) {
			m.RequestReconcile()
		}
		// A definite refusal assigned nothing.
		return nil, errors.Join(err, m.dropIPOp(ctx, op.OpID))
	}
	err = m.books.Update(ctx, func(st *journal.State) error {
		if e := st.ENIByID(op.ENI); e != nil {
			record(st, e, slots)
		}
		st.IPOps = slices.DeleteFunc(st.IPOps, func(o journal.IPOp) bool { return o.OpID == op.OpID })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journaling the %s of ENI %s: %w", what, op.ENI, err)
	}
	return slots, nil
}

// UnassignIPs gives free slots of eniID (secondary IPs and /28 prefixes) back to the subnet. They leave the
// pool when the op is journaled, before the call. When EC2 refuses the call and still shows every one of
// them on the ENI, the op is dropped: they are the pool's again, and the error (classified) says why.
func (m *Manager) UnassignIPs(ctx context.Context, eniID string, ips []string) error {
	op := journal.IPOp{OpID: NewOpID(), Kind: journal.UnassignIPs, ENI: eniID, IPs: ips, Since: m.clock.Now()}
	err := m.books.Update(ctx, func(st *journal.State) error {
		for _, a := range st.Assignments {
			if journal.CoveredBy(ips, a.IP) {
				return fmt.Errorf("unassigning IP %s: %w: assigned to %s", a.IP, ErrBusy, a.ContainerID)
			}
		}
		st.IPOps = append(st.IPOps, op)
		return nil
	})
	if err != nil {
		return fmt.Errorf("journaling IP release on ENI %s: %w", eniID, err)
	}
	return m.unassign(ctx, op)
}

func (m *Manager) unassign(ctx context.Context, op journal.IPOp) error {
	ips, prefixes := journal.SplitSlots(op.IPs)
	_, err := m.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(op.ENI), PrivateIpAddresses: ips, Ipv4Prefixes: prefixes,
	})
	if err != nil && ec2client.ErrorCode(err) != ec2client.CodeENINotFound {
		err = ec2client.Classify(fmt.Sprintf("unassigning %d IPs from ENI %s", len(op.IPs), op.ENI), err)
		if errors.Is(err, ec2client.ErrTransient) || errors.Is(err, context.Canceled) {
			return err
		}
		// Refused, e.g. because a lost earlier answer already took some addresses away: keep in the op only
		// the addresses EC2 still shows on the ENI, and send it again.
		ni, derr := m.describeOne(ctx, op.ENI)
		if derr != nil {
			return errors.Join(err, derr)
		}
		var still []string
		if ni != nil {
			for _, ip := range slotsOf(ni) {
				if slices.Contains(op.IPs, ip) {
					still = append(still, ip)
				}
			}
		}
		if len(still) == len(op.IPs) && errors.Is(err, ec2client.ErrUnauthorized) {
			// IAM denies the call, so this send took nothing: the op goes and its addresses are the pool's
			// again. Sending it again every round would meet the same refusal; the caller backs off. Any other
			// refusal with every address still listed may be a Describe that lags behind an earlier send that
			// EC2 applied (an op resumed after a restart, say): its addresses stay out of the pool and the op
			// is sent again until EC2's lists agree.
			return errors.Join(err, m.dropIPOp(ctx, op.OpID))
		}
		if len(still) > 0 {
			uerr := m.books.Update(ctx, func(st *journal.State) error {
				for i := range st.IPOps {
					if st.IPOps[i].OpID == op.OpID {
						st.IPOps[i].IPs = still
					}
				}
				return nil
			})
			return errors.Join(err, uerr)
		}
	}
	err = m.books.Update(ctx, func(st *journal.State) error {
		if e := st.ENIByID(op.ENI); e != nil {
			e.IPs = slices.DeleteFunc(e.IPs, func(ip string) bool { return slices.Contains(op.IPs, ip) })
		}
		st.Cooldowns = slices.DeleteFunc(st.Cooldowns, func(c journal.Cooldown) bool { return journal.CoveredBy(op.IPs, c.IP) })
		st.IPOps = slices.DeleteFunc(st.IPOps, func(o journal.IPOp) bool { return o.OpID == op.OpID })
		m.rememberUnassigned(st, op.ENI, op.IPs)
		return nil
	})
	if err != nil {
		return fmt.Errorf("journaling released IPs of ENI %s: %w", op.ENI, err)
	}
	m.log.Info("IPs released from ENI", "eni", op.ENI, "count", len(op.IPs))
	return nil
}

func (m *Manager) dropIPOp(ctx context.Context, opID string) error {
	return m.books.Update(ctx, func(st *journal.State) error {
		st.IPOps = slices.DeleteFunc(st.IPOps, func(o journal.IPOp) bool { return o.OpID == opID })
		return nil
	})
}

// ResumeIPOps settles every IP operation a crash or a lost answer left in the journal: an assign is resolved
// by reading the ENI's addresses from EC2, an unassign is sent again.
func (m *Manager) ResumeIPOps(ctx context.Context) error {
	var ops []journal.IPOp
	m.books.View(func(st *journal.State) { ops = slices.Clone(st.IPOps) })
	var errs []error
	for _, op := range ops {
		switch op.Kind {
		case journal.UnassignIPs:
			if op.IPv6 {
				errs = append(errs, m.unassignIPv6(ctx, op))
				continue
			}
			errs = append(errs, m.unassign(ctx, op))
		case journal.AssignIPs:
			ni, err := m.describeOne(ctx, op.ENI)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			now := m.clock.Now()
			err = m.books.Update(ctx, func(st *journal.State) error {
				switch e := st.ENIByID(op.ENI); {
				case e == nil || ni == nil:
				case op.IPv6:
					held := len(e.IPv6Prefixes)
					m.adoptIPv6Prefixes(st, e, ni)
					if len(e.IPv6Prefixes) == held && m.recent(op.Since, now) {
						// No /80 shows yet, but a Describe may lag behind an assign EC2 applied: concluding
						// "not applied" now sends a second AssignIpv6Addresses, and the first /80 appears
						// later, outside the books. The op stands until the visibility grace has passed.
						return nil
					}
				default:
					m.fillIPs(e, slotsOf(ni), st)
				}
				st.IPOps = slices.DeleteFunc(st.IPOps, func(o journal.IPOp) bool { return o.OpID == op.OpID })
				return nil
			})
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
