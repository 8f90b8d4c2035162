package eni

import (
	"context"
	"fmt"

	"github.com/eniwire/eniwire/controller/journal"
)

// takeMoved takes an ENI of the books that EC2 shows attached to another instance out of use: it is not
// ours to hand out any more, and that instance's node may give its addresses to pods of its own. A record
// no pod holds an IP of is forgotten (the ENI is not deleted: it serves its new instance); one with pods
// stays, state Moved, so that their assignments keep naming their ENI until the pods go, and the pods are
// reported, since their traffic is broken. Its free IPs and cooldowns leave the pool either way.
func (m *Manager) takeMoved(ctx context.Context, rec journal.ENI, instance string, rep *Report) error {
	var held []string
	err := m.books.Update(ctx, func(st *journal.State) error {
		held = nil
		e := st.ENIByID(rec.ID)
		if e == nil {
			return nil
		}
		for _, a := range st.Assignments {
			if a.ENI == rec.ID {
				held = append(held, a.IP)
			}
		}
		st.Cooldowns = dropENI(st.Cooldowns, rec.ID)
		if len(held) == 0 {
			st.RemoveENI(e.OpID)
			return nil
		}
		if e.State != journal.Moved {
			e.State, e.Since = journal.Moved, m.clock.Now()
			e.LastError = fmt.Sprintf("attached to instance %s; its pods' traffic is broken until they are deleted", instance)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journaling ENI %s moved to instance %s: %w", rec.ID, instance, err)
	}
	rep.Moved = append(rep.Moved, rec.ID)
	if len(held) == 0 {
		m.log.Warn("ENI of the books is attached to another instance; forgotten", "eni", rec.ID, "instance", instance)
		return nil
	}
	if rec.State != journal.Moved {
		m.log.Error("ENI holding pods is attached to another instance; its IPs leave the pool", "eni", rec.ID,
			"instance", instance, "podIPs", held)
	}
	m.reportHeld(rec.ID, held, rep)
	return nil
}
