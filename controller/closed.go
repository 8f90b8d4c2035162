package controller

// A primary ENI launched without the cluster tag cannot take pod IPs: the IAM policy allows
// AssignPrivateIpAddresses only on ENIs tagged for the cluster (deploy/README.md), so EC2 refuses it with
// UnauthorizedOperation. Backing the whole pool off for that left a node without any pod IP; instead the
// primary is closed to new IPs, the deficit goes to secondary ENIs, and the status says why. It is tried
// again every reopenClosedAfter, so a primary tagged later takes IPs without a restart.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/internal/clock"
)

// reopenClosedAfter is how long an ENI stays closed before the pool tries it again.
const reopenClosedAfter = 30 * time.Minute

// closure is why and since when an ENI is closed to new IPs.
type closure struct {
	why string
	at  time.Time
}

// closedENIs are the ENIs EC2 refuses new IPs for, and why. Who may touch it: any goroutine (the assigns of a
// round run side by side), under its own lock.
type closedENIs struct {
	clock clock.Clock

	mu     sync.Mutex
	closed map[string]closure
}

// close closes eniID to new IPs for why, and reports whether it was closed already.
func (c *closedENIs) close(eniID, why string) (already bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		c.closed = map[string]closure{}
	}
	_, already = c.closed[eniID]
	c.closed[eniID] = closure{why: why, at: c.clock.Now()}
	return already
}

// mark marks the closed ENIs of counts; closures older than reopenClosedAfter end.
func (c *closedENIs) mark(counts *pool.Counts) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cl := range c.closed {
		if now.Sub(cl.at) >= reopenClosedAfter {
			delete(c.closed, id)
		}
	}
	for i := range counts.ENIs {
		_, counts.ENIs[i].Closed = c.closed[counts.ENIs[i].ID]
	}
}

// status is why the first closed ENI (by id) is closed, or "".
func (c *closedENIs) status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(c.closed)) {
		return c.closed[id].why
	}
	return ""
}

// because is status with its reason.
func (c *closedENIs) because() (reason, line string) {
	if s := c.status(); s != "" {
		return api.PoolENIClosed, s
	}
	return "", ""
}

// closeIfRefused closes the primary ENI eniID to new IPs after an IAM refusal (err) of them.
func (m *poolManager) closeIfRefused(eniID string, err error) {
	why := fmt.Sprintf("the primary ENI %s refuses AssignPrivateIpAddresses (%s: tag it %s=<cluster>, see deploy/README.md); "+
		"pods get IPs of secondary ENIs", eniID, ec2client.ErrorCode(err), eni.TagCluster)
	if !m.closed.close(eniID, why) {
		m.log.Warn("primary ENI closed to pod IPs; falling back to secondary ENIs", "eni", eniID, "error", err)
	}
}

// closeIfFull closes eniID to new IPs after its subnet refused them for want of addresses (err) if subnet
// discovery has another candidate, and reports whether it did: the deficit then goes to a new ENI there.
func (m *poolManager) closeIfFull(ctx context.Context, eniID, subnetID string, err error) bool {
	if !m.place.SubnetFull(ctx, subnetID) {
		return false
	}
	m.closed.close(eniID, fmt.Sprintf("subnet %s of ENI %s has no free addresses (%s); new IPs come from an ENI in another subnet",
		subnetID, eniID, ec2client.ErrorCode(err)))
	return true
}

// counts is the view's counts with the closed ENIs marked. A retired ENI (package subnet) is closed and its free
// addresses do not count: the pool grows elsewhere, and the ENI goes by the surplus path once its pods have.
func (m *poolManager) counts(v *pool.View) pool.Counts {
	c := v.Counts()
	if m.waiting != nil {
		c.Waiting = m.waiting(m.clock.Now())
	}
	retired := m.place.Retired()
	m.closed.mark(&c)
	for i := range c.ENIs {
		if e := &c.ENIs[i]; retired[e.ID] {
			e.Closed, e.Retired = true, true
			e.IPs, e.FreeSingles, e.EmptyPrefixes = e.Assigned+e.Cooldown, 0, 0
		}
	}
	return c
}
