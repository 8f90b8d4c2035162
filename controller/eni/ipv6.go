package eni

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

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
		return false, nil
	case pending:
		if err := m.ResumeIPOps(ctx); err != nil {
			return false, err
		}
		return true, nil
	}
	ni, err := m.describeOne(ctx, eniID)
	if err != nil {
		return false, err
	}
	if ni != nil && len(ni.Ipv6Prefixes) > 0 {
		err := m.books.Update(ctx, func(st *journal.State) error {
			if e := st.ENIByID(eniID); e != nil {
				adoptIPv6Prefixes(e, ni)
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
	m.log.Info("IPv6 prefix assigned to ENI", "eni", eniID, "prefixes", prefixes)
	return true, nil
}

// adoptIPv6Prefixes puts in the books every /80 EC2 shows on the ENI. It runs inside a books update.
func adoptIPv6Prefixes(e *journal.ENI, ni *types.NetworkInterface) {
	for _, p := range ipv6PrefixesOf(ni) {
		if !slices.Contains(e.IPv6Prefixes, p) {
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
