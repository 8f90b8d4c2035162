package ec2sim

import (
	"net/netip"
	"slices"
	"time"
)

// The attachment life cycle: attaching -> attached after AttachDelay, detaching -> detached after
// DetachDelay. Pending transitions are settled lazily on every request (so answers are exact at any
// moment) and by a timer (so events fire on time even when nobody asks).

func (s *Sim) newENILocked(sn *subnet, groups []string, desc string, now time.Time) *eni {
	e := &eni{ID: s.newID("eni", func(x string) bool { return s.enis[x] != nil }), SubnetID: sn.ID, VPCID: sn.VPCID,
		AZ: sn.AZ, MAC: s.newMAC(), Description: desc, Groups: slices.Clone(groups), SourceDestCheck: true,
		Tags: map[string]string{}, Created: now, VisibleAt: now}
	s.enis[e.ID] = e
	return e
}

func (e *eni) status() string {
	if e.Att == nil {
		return "available"
	}
	return "in-use"
}

func ipStrings(ips []stamped[netip.Addr]) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.V.String()
	}
	return out
}

func prefixStrings(ps []stamped[netip.Prefix]) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.V.String()
	}
	return out
}

func (s *Sim) emitAttachedLocked(e *eni) {
	sn := s.subnets[e.SubnetID]
	s.emit(ENIAttached{InstanceID: e.Att.InstanceID, ENIID: e.ID, MAC: e.MAC, DeviceIndex: e.Att.DeviceIndex,
		CardIndex: e.Att.CardIdx, SubnetID: sn.ID, SubnetCIDR: sn.CIDR.String(), Gateway: sn.Gateway().String(),
		PrimaryIP: e.IPs[0].V.String(), IPs: ipStrings(e.IPs), Prefixes: prefixStrings(e.Prefixes)})
	if len(e.IPs) > 1 || len(e.Prefixes) > 0 || e.ipv6Slots() > 0 {
		s.emit(IPsAssigned{InstanceID: e.Att.InstanceID, ENIID: e.ID, IPs: ipStrings(e.IPs[1:]),
			Prefixes: prefixStrings(e.Prefixes), IPv6s: ipStrings(e.IPv6s), IPv6Prefixes: prefixStrings(e.IPv6Prefixes)})
	}
}

// schedule makes sure settleLocked runs once d of virtual time has passed.
func (s *Sim) schedule(d time.Duration) {
	ch := s.clk.After(d)
	go func() {
		<-ch
		s.mu.Lock()
		s.settleLocked()
		s.mu.Unlock()
	}()
}

// settleLocked completes every transition whose time has come.
func (s *Sim) settleLocked() {
	if len(s.pending) == 0 {
		return
	}
	now := s.clk.Now()
	var due []*eni
	for e := range s.pending {
		if e.Att == nil || !now.Before(e.Att.Deadline) {
			due = append(due, e)
		}
	}
	// Complete in deadline order so events keep the order of the changes.
	slices.SortFunc(due, func(a, b *eni) int {
		if a.Att == nil || b.Att == nil {
			return 0
		}
		return a.Att.Deadline.Compare(b.Att.Deadline)
	})
	for _, e := range due {
		delete(s.pending, e)
		if e.Att == nil {
			continue
		}
		switch e.Att.Status {
		case "attaching":
			s.finishAttachLocked(e, e.Att.Deadline)
		case "detaching":
			s.finishDetachLocked(e)
		}
	}
}

func (s *Sim) startAttachLocked(e *eni, inst *instance, devIdx, card int) *attachment {
	now := s.clk.Now()
	a := &attachment{ID: s.newID("eni-attach", func(x string) bool { return s.attachments[x] != nil }),
		InstanceID: inst.ID, DeviceIndex: devIdx, CardIdx: card, Status: "attaching", AttachTime: now,
		Deadline: now.Add(s.cfg.AttachDelay)}
	e.Att = a
	s.attachments[a.ID] = e
	inst.attached[e.ID] = e
	if s.cfg.AttachDelay <= 0 {
		s.finishAttachLocked(e, now)
	} else {
		s.pending[e] = struct{}{}
		s.schedule(s.cfg.AttachDelay)
	}
	s.log.Info("eni attaching", "eni", e.ID, "instance", inst.ID, "device_index", devIdx, "attachment", a.ID)
	return a
}

func (s *Sim) finishAttachLocked(e *eni, at time.Time) {
	e.Att.Status = "attached"
	e.Att.AttachedAt = at
	s.emitAttachedLocked(e)
	s.log.Info("eni attached", "eni", e.ID, "instance", e.Att.InstanceID)
}

func (s *Sim) startDetachLocked(e *eni) {
	if e.Att.Status == "detaching" {
		return
	}
	e.Att.Status = "detaching"
	if s.cfg.DetachDelay <= 0 {
		s.finishDetachLocked(e)
		return
	}
	e.Att.Deadline = s.clk.Now().Add(s.cfg.DetachDelay)
	s.pending[e] = struct{}{}
	s.schedule(s.cfg.DetachDelay)
	s.log.Info("eni detaching", "eni", e.ID, "instance", e.Att.InstanceID)
}

// finishDetachLocked removes the attachment at once (also used by termination).
func (s *Sim) finishDetachLocked(e *eni) {
	a := e.Att
	if a == nil {
		return
	}
	delete(s.pending, e)
	if inst := s.instances[a.InstanceID]; inst != nil {
		delete(inst.attached, e.ID)
	}
	delete(s.attachments, a.ID)
	e.Att = nil
	sn := s.subnets[e.SubnetID]
	s.emit(ENIDetached{InstanceID: a.InstanceID, ENIID: e.ID, MAC: e.MAC, DeviceIndex: a.DeviceIndex, CardIndex: a.CardIdx,
		SubnetID: sn.ID, SubnetCIDR: sn.CIDR.String(), PrimaryIP: e.IPs[0].V.String()})
	s.log.Info("eni detached", "eni", e.ID, "instance", a.InstanceID)
}

func (s *Sim) deleteENILocked(e *eni) {
	sn := s.subnets[e.SubnetID]
	for _, ip := range e.IPs {
		sn.release(ip.V)
		delete(s.ipOwner, ip.V)
	}
	for _, p := range e.Prefixes {
		sn.releasePrefix(p.V)
	}
	if sn.IPv6 != nil {
		for _, a := range e.IPv6s {
			sn.IPv6.releaseAddr(a.V)
		}
		for _, p := range e.IPv6Prefixes {
			delete(sn.IPv6.prefixes, p.V)
		}
	}
	delete(s.enis, e.ID)
	delete(s.macs, e.MAC)
	s.log.Info("eni deleted", "eni", e.ID)
}

// ipLimitLocked is the number of IPv4 slots (primary + secondaries + prefixes) the ENI may hold: its
// instance type's limit when attached, else the largest any type allows.
func (s *Sim) ipLimitLocked(e *eni) int {
	if inst := s.attachedInstanceLocked(e); inst != nil {
		return instanceTypes[inst.Type].IPv4PerENI
	}
	return maxIPv4PerENI
}

// attachedInstanceLocked is the instance e is attached to, or nil.
func (s *Sim) attachedInstanceLocked(e *eni) *instance {
	if e.Att == nil {
		return nil
	}
	return s.instances[e.Att.InstanceID]
}

const maxIPv4PerENI = 50

func (e *eni) slots() int { return len(e.IPs) + len(e.Prefixes) }

func (e *eni) hasIP(a netip.Addr) int {
	for i, ip := range e.IPs {
		if ip.V == a {
			return i
		}
	}
	return -1
}

// addIPsLocked records addresses already taken from the subnet as the ENI's.
func (s *Sim) addIPsLocked(e *eni, ips []netip.Addr, now time.Time) {
	for _, a := range ips {
		e.IPs = append(e.IPs, stamped[netip.Addr]{V: a, Since: now})
		s.ipOwner[a] = e
	}
}

// removeIPLocked gives a secondary address back to the subnet.
func (s *Sim) removeIPLocked(e *eni, a netip.Addr) {
	if i := e.hasIP(a); i > 0 {
		e.IPs = slices.Delete(e.IPs, i, i+1)
		s.subnets[e.SubnetID].release(a)
		delete(s.ipOwner, a)
	}
}

// eventInstanceLocked is the instance an IP change is reported against: only a settled attachment counts,
// since an ENI still attaching reports its IPs in ENIAttached.
func eventInstance(e *eni) string {
	if e.Att != nil && e.Att.Status != "attaching" {
		return e.Att.InstanceID
	}
	return ""
}
