package controller

// A primary ENI launched without the cluster tag cannot take pod IPs: the IAM policy allows
// AssignPrivateIpAddresses only on ENIs tagged for the cluster (deploy/README.md), so EC2 refuses it with
// UnauthorizedOperation. Backing the whole pool off for that left a node without any pod IP; instead the
// primary is closed to new IPs, the deficit goes to secondary ENIs, and the status says why. It is tried
// again every reopenClosedAfter, so a primary tagged later takes IPs without a restart.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/pool"
)

// closeIfRefused closes the primary ENI eniID to new IPs if err is IAM refusing them, and reports whether it
// did.
func (m *poolManager) closeIfRefused(eniID string, err error) bool {
	if !errors.Is(err, ec2client.ErrUnauthorized) {
		return false
	}
	why := fmt.Sprintf("the primary ENI %s refuses AssignPrivateIpAddresses (%s: tag it %s=<cluster>, see deploy/README.md); "+
		"pods get IPs of secondary ENIs", eniID, ec2client.ErrorCode(err), eni.TagCluster)
	m.mu.Lock()
	_, known := m.closed[eniID]
	m.closed[eniID] = closure{why: why, at: m.clock.Now()}
	m.mu.Unlock()
	if !known {
		m.log.Warn("primary ENI closed to pod IPs; falling back to secondary ENIs", "eni", eniID, "error", err)
	}
	m.status.set(why)
	return true
}

// reopenClosedAfter is how long an ENI stays closed before the pool tries it again.
const reopenClosedAfter = 30 * time.Minute

// closure is why and since when an ENI is closed to new IPs.
type closure struct {
	why string
	at  time.Time
}

// closeIfFull closes eniID to new IPs if err is its subnet refusing them for want of addresses while subnet
// discovery has another candidate, and reports whether it did: the deficit then goes to a new ENI there.
func (m *poolManager) closeIfFull(ctx context.Context, eniID, subnetID string, err error) bool {
	if !errors.Is(err, ec2client.ErrSubnetFull) || !m.place.SubnetFull(ctx, subnetID) {
		return false
	}
	why := fmt.Sprintf("subnet %s of ENI %s has no free addresses (%s); new IPs come from an ENI in another subnet",
		subnetID, eniID, ec2client.ErrorCode(err))
	m.mu.Lock()
	m.closed[eniID] = closure{why: why, at: m.clock.Now()}
	m.mu.Unlock()
	m.status.set(why)
	return true
}

// counts is the view's counts with the closed ENIs marked; closures older than reopenClosedAfter end. A
// retired ENI (package subnet) is closed and its free addresses do not count: the pool grows elsewhere, and
// the ENI goes by the surplus path once its pods have.
func (m *poolManager) counts(v *pool.View) pool.Counts {
	c := v.Counts()
	now := m.clock.Now()
	retired := m.place.Retired()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, cl := range m.closed {
		if now.Sub(cl.at) >= reopenClosedAfter {
			delete(m.closed, id)
		}
	}
	for i := range c.ENIs {
		e := &c.ENIs[i]
		_, e.Closed = m.closed[e.ID]
		if retired[e.ID] {
			e.Closed, e.Retired = true, true
			e.IPs, e.FreeSingles, e.EmptyPrefixes = e.Assigned+e.Cooldown, 0, 0
		}
	}
	return c
}

// standingNote is the status line while the pool meets its targets (a new ENI's plan in flight counts): the
// last refusal of an action EC2 has not accepted since, why an ENI is closed, or "".
func (m *poolManager) standingNote() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.refused {
		return r.note
	}
	for _, cl := range m.closed {
		return cl.why
	}
	return ""
}
