package ec2sim

import (
	"fmt"
	"slices"
	"sort"
)

// InstanceSpec describes an instance to launch. ID is generated when empty; SecurityGroups default to the
// VPC's default group.
type InstanceSpec struct {
	ID             string   `json:"id,omitempty"`
	Type           string   `json:"type"`
	SubnetID       string   `json:"subnetId"`
	SecurityGroups []string `json:"securityGroups,omitempty"`
}

// Instance is what a node learns about itself from IMDS.
type Instance struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	PrimaryENI string `json:"primaryENI"`
	PrimaryIP  string `json:"primaryIP"`
	PrimaryMAC string `json:"primaryMAC"`
	SubnetID   string `json:"subnetId"`
	SubnetCIDR string `json:"subnetCIDR"`
	VPCID      string `json:"vpcId"`
	VPCCIDR    string `json:"vpcCIDR"`
	// VPCCIDRs are all the VPC's IPv4 blocks, the primary (VPCCIDR) first.
	VPCCIDRs       []string `json:"vpcCIDRs"`
	AZ             string   `json:"az"`
	SecurityGroups []string `json:"securityGroups"`
	State          string   `json:"state"`
}

// AddInstance launches a running instance with its primary ENI (device index 0, DeleteOnTermination).
func (s *Sim) AddInstance(spec InstanceSpec) (Instance, error) {
	inst, err := s.addInstance(spec)
	if err != nil {
		return Instance{}, err
	}
	s.mu.Lock()
	hooks := slices.Clone(s.onInstance)
	s.mu.Unlock()
	for _, h := range hooks {
		h(inst)
	}
	return inst, nil
}

func (s *Sim) addInstance(spec InstanceSpec) (Instance, error) {
	it, ok := instanceTypes[spec.Type]
	if !ok {
		return Instance{}, fmt.Errorf("adding instance: type %q: %w", spec.Type, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.subnets[spec.SubnetID]
	if sn == nil {
		return Instance{}, fmt.Errorf("adding instance: subnet %q: %w", spec.SubnetID, ErrNotFound)
	}
	if spec.ID == "" {
		spec.ID = s.newID("i", func(x string) bool { return s.instances[x] != nil })
	}
	if s.instances[spec.ID] != nil {
		return Instance{}, fmt.Errorf("adding instance %s: %w", spec.ID, ErrExists)
	}
	if sn.Free() < 1 {
		return Instance{}, fmt.Errorf("adding instance %s: subnet %s has no free address: %w", spec.ID, sn.ID, ErrInvalid)
	}
	sgs := spec.SecurityGroups
	if len(sgs) == 0 {
		sgs = []string{s.vpcs[sn.VPCID].SG}
	}
	if err := s.checkENIGroupsLocked(sgs, sn.VPCID, func(quota int) *APIError {
		return apiErr(CodeSecurityGroupsPerInterfaceLimit, "More than %d security groups per interface.", quota)
	}); err != nil {
		return Instance{}, fmt.Errorf("adding instance %s: %s: %w", spec.ID, err.Message, ErrInvalid)
	}
	now := s.clk.Now()
	inst := &instance{ID: spec.ID, Type: it.Name, AZ: sn.AZ, SubnetID: sn.ID, VPCID: sn.VPCID, SGs: slices.Clone(sgs),
		State: "running", Launched: now, attached: map[string]*eni{}, Tags: map[string]string{}, Metadata: defaultMetadataOptions()}
	e := s.newENILocked(sn, sgs, "Primary network interface", now)
	s.addIPsLocked(e, sn.allocate(1), now)
	e.Att = &attachment{ID: s.newID("eni-attach", func(x string) bool { return s.attachments[x] != nil }),
		InstanceID: inst.ID, Status: "attached", AttachTime: now, AttachedAt: now, DeleteOnTermination: true}
	s.attachments[e.Att.ID] = e
	inst.Primary = e
	inst.attached[e.ID] = e
	s.instances[inst.ID] = inst
	out := s.instanceViewLocked(inst)
	s.emit(InstanceAdded{Instance: out})
	s.emitAttachedLocked(e)
	s.log.Info("instance added", "instance", inst.ID, "type", inst.Type, "subnet", sn.ID, "ip", out.PrimaryIP)
	return out, nil
}

func (s *Sim) instanceViewLocked(inst *instance) Instance {
	sn := s.subnets[inst.SubnetID]
	vpc := s.vpcs[inst.VPCID]
	v := Instance{ID: inst.ID, Type: inst.Type, SubnetID: inst.SubnetID, SubnetCIDR: sn.CIDR.String(), VPCID: inst.VPCID,
		VPCCIDR: vpc.CIDR.String(), VPCCIDRs: vpc.blockList(), AZ: inst.AZ, SecurityGroups: slices.Clone(inst.SGs),
		State: inst.State}
	if p := inst.Primary; p != nil {
		v.PrimaryENI, v.PrimaryMAC = p.ID, p.MAC
		v.PrimaryIP = p.IPs[0].V.String()
	}
	return v
}

// Instance returns one instance as the Go API sees it.
func (s *Sim) Instance(id string) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.instances[id]
	if inst == nil {
		return Instance{}, fmt.Errorf("looking up instance %s: %w", id, ErrNotFound)
	}
	return s.instanceViewLocked(inst), nil
}

// Instances lists the instances, sorted by id.
func (s *Sim) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, inst := range s.instances {
		out = append(out, s.instanceViewLocked(inst))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// TerminateInstance ends an instance: ENIs with DeleteOnTermination are deleted with it, the others are
// detached and become available.
func (s *Sim) TerminateInstance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	inst := s.instances[id]
	if inst == nil {
		return fmt.Errorf("terminating instance %s: %w", id, ErrNotFound)
	}
	if inst.State == "terminated" {
		return nil
	}
	var deleted []string
	ids := make([]string, 0, len(inst.attached))
	for eid := range inst.attached {
		ids = append(ids, eid)
	}
	sort.Strings(ids)
	for _, eid := range ids {
		e := inst.attached[eid]
		dot := e.Att.DeleteOnTermination
		s.finishDetachLocked(e)
		if dot {
			s.deleteENILocked(e)
			deleted = append(deleted, e.ID)
		}
	}
	inst.State = "terminated"
	inst.Primary = nil
	s.emit(InstanceTerminated{InstanceID: id, DeletedENIs: deleted})
	s.log.Info("instance terminated", "instance", id, "deleted_enis", deleted)
	return nil
}
