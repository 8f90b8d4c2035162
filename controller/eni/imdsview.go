package eni

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
)

// ViewFromIMDS gives a new instance its first view of its ENIs from IMDS instead of EC2, and reports whether
// it did. It does when the books hold no ENI (no run of ours wrote any on this instance) and IMDS shows one
// ENI alone, at device index 0 of card 0, with no IPv6: the instance's primary ENI, untouched since launch,
// which goes into the books as a reconcile would put it. Anything else (another ENI attached, by someone else
// or by a run whose journal is lost; IMDS unreachable) leaves the first view to Reconcile, since IMDS holds no
// tags to tell whose an ENI is. The list of the instance's own available ENIs, which only a lost journal
// could fill, is left to the first Reconcile, which comes later as housekeeping.
//
// Why: a rollout's nodes start in the same seconds, and every pod of a node waits for its first view, while
// their describes share the account's bucket (100, then 20 a second); IMDS answers each instance alone. At
// 1,000 nodes the first reconciles were 5,541 of the 9,654 describes sent before the last pod had its IP.
func (m *Manager) ViewFromIMDS(ctx context.Context) (bool, error) {
	if m.imds == nil {
		return false, nil
	}
	fresh := false
	m.books.View(func(st *journal.State) { fresh = len(st.ENIs) == 0 })
	if !fresh {
		return false, nil
	}
	enis, err := m.imds.ENIs(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the instance's ENIs from IMDS: %w", err)
	}
	if len(enis) != 1 {
		return false, nil
	}
	ni, ok := primaryFromIMDS(enis[0], m.cfg.InstanceID)
	if !ok {
		return false, nil
	}
	now := m.clock.Now()
	var rep Report
	err = m.books.Update(ctx, func(st *journal.State) error {
		if len(st.ENIs) != 0 {
			return errNotFresh
		}
		m.reconcileAttached(st, &ni, now, &rep, map[string][]string{})
		return nil
	})
	if errors.Is(err, errNotFresh) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("journaling the first view from IMDS: %w", err)
	}
	m.mu.Lock()
	m.occupied = map[int]string{0: aws.ToString(ni.NetworkInterfaceId)}
	m.ownListOwed = true
	m.mu.Unlock()
	m.log.Info("first view of the instance's ENIs from IMDS", "primary", aws.ToString(ni.NetworkInterfaceId),
		"slots", len(slotsOf(&ni)))
	return true, nil
}

// errNotFresh: the books gained an ENI between the look and the update.
var errNotFresh = errors.New("books no longer empty")

// primaryFromIMDS is the primary ENI e as EC2 would list it, from the keys IMDS shows, when e is the instance's
// primary ENI with no IPv6.
func primaryFromIMDS(e metadata.IMDSENI, instanceID string) (types.NetworkInterface, bool) {
	if e.DeviceIndex != 0 || e.NetworkCard != 0 || e.ID == "" || e.SubnetID == "" || len(e.IPs) == 0 ||
		len(e.IPv6.Addrs)+len(e.IPv6.Prefixes) > 0 {
		return types.NetworkInterface{}, false
	}
	ni := types.NetworkInterface{
		NetworkInterfaceId: aws.String(e.ID),
		MacAddress:         aws.String(e.MAC),
		SubnetId:           aws.String(e.SubnetID),
		PrivateIpAddress:   aws.String(e.IPs[0].String()),
		Attachment: &types.NetworkInterfaceAttachment{DeviceIndex: aws.Int32(0), InstanceId: aws.String(instanceID),
			Status: types.AttachmentStatusAttached},
		Status: types.NetworkInterfaceStatusInUse,
	}
	for i, ip := range e.IPs {
		ni.PrivateIpAddresses = append(ni.PrivateIpAddresses,
			types.NetworkInterfacePrivateIpAddress{PrivateIpAddress: aws.String(ip.String()), Primary: aws.Bool(i == 0)})
	}
	for _, p := range e.IPv4Prefixes {
		ni.Ipv4Prefixes = append(ni.Ipv4Prefixes, types.Ipv4PrefixSpecification{Ipv4Prefix: aws.String(p.String())})
	}
	return ni, true
}
