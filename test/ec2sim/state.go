package ec2sim

import (
	"sort"
	"time"
)

// State is the whole simulated world at one moment, for the admin dump, tests and the vpcfabric's
// initial sync.
type State struct {
	Region     string     `json:"region"`
	AccountID  string     `json:"accountId"`
	Now        time.Time  `json:"now"`
	Throttling bool       `json:"throttling"`
	VPCs       []VPCState `json:"vpcs"`
	// Groups carry their rules (SecurityGroupSpec.Rules is never nil here).
	Groups    []SecurityGroupSpec `json:"securityGroups"`
	Subnets   []SubnetState       `json:"subnets"`
	Instances []InstanceState     `json:"instances"`
	ENIs      []ENIState          `json:"enis"`
	Faults    FaultsState         `json:"faults"`
}

type VPCState struct {
	ID        string `json:"id"`
	CIDR      string `json:"cidr"`
	DefaultSG string `json:"defaultSecurityGroup"`
	// CIDRBlocks are all the associated IPv4 blocks, the primary first.
	CIDRBlocks []string `json:"cidrBlocks"`
	// IPv6CIDRBlocks are the VPC's IPv6 /56s.
	IPv6CIDRBlocks []string          `json:"ipv6CidrBlocks,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
}

// SubnetState is a subnet with its free-address count; Tags (of SubnetSpec) are its current tags.
type SubnetState struct {
	SubnetSpec
	Available int    `json:"availableIpAddressCount"`
	Gateway   string `json:"gateway"`
}

type InstanceState struct {
	Instance
	ENIs []string          `json:"enis"`
	Tags map[string]string `json:"tags,omitempty"`
}

type AttachmentState struct {
	ID                  string `json:"id"`
	InstanceID          string `json:"instanceId"`
	DeviceIndex         int    `json:"deviceIndex"`
	NetworkCardIndex    int    `json:"networkCardIndex"`
	Status              string `json:"status"`
	DeleteOnTermination bool   `json:"deleteOnTermination"`
}

type ENIState struct {
	ID              string            `json:"id"`
	SubnetID        string            `json:"subnetId"`
	VPCID           string            `json:"vpcId"`
	AZ              string            `json:"az"`
	MAC             string            `json:"mac"`
	Description     string            `json:"description"`
	Status          string            `json:"status"`
	Groups          []string          `json:"groups"`
	SourceDestCheck bool              `json:"sourceDestCheck"`
	PrimaryIP       string            `json:"primaryIP"`
	IPs             []string          `json:"ips"`
	Prefixes        []string          `json:"prefixes,omitempty"`
	IPv6s           []string          `json:"ipv6s,omitempty"`
	IPv6Prefixes    []string          `json:"ipv6Prefixes,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	Attachment      *AttachmentState  `json:"attachment,omitempty"`
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Sim) eniStateLocked(e *eni) ENIState {
	st := ENIState{ID: e.ID, SubnetID: e.SubnetID, VPCID: e.VPCID, AZ: e.AZ, MAC: e.MAC, Description: e.Description,
		Status: e.status(), Groups: append([]string(nil), e.Groups...), SourceDestCheck: e.SourceDestCheck,
		PrimaryIP: e.IPs[0].V.String(), IPs: ipStrings(e.IPs), Prefixes: prefixStrings(e.Prefixes), IPv6s: ipStrings(e.IPv6s), IPv6Prefixes: prefixStrings(e.IPv6Prefixes),
		Tags: cloneMap(e.Tags)}
	if a := e.Att; a != nil {
		st.Attachment = &AttachmentState{ID: a.ID, InstanceID: a.InstanceID, DeviceIndex: a.DeviceIndex,
			NetworkCardIndex: a.CardIdx, Status: a.Status, DeleteOnTermination: a.DeleteOnTermination}
	}
	return st
}

// ENI returns one ENI's state (invisible ENIs included: this is the Go API, not EC2).
func (s *Sim) ENI(id string) (ENIState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	e := s.enis[id]
	if e == nil {
		return ENIState{}, false
	}
	return s.eniStateLocked(e), true
}

// Snapshot returns the whole state, sorted by id.
func (s *Sim) Snapshot() State {
	faults := s.faults.State()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	st := State{Region: s.cfg.Region, AccountID: s.cfg.AccountID, Now: s.clk.Now(), Throttling: s.cfg.Throttling, Faults: faults}
	for _, v := range s.vpcs {
		st.VPCs = append(st.VPCs, VPCState{ID: v.ID, CIDR: v.CIDR.String(), DefaultSG: v.SG, CIDRBlocks: v.blockList(),
			IPv6CIDRBlocks: v.ipv6BlockList(), Tags: cloneMap(v.Tags)})
	}
	sort.Slice(st.VPCs, func(i, j int) bool { return st.VPCs[i].ID < st.VPCs[j].ID })
	for _, g := range s.groups {
		st.Groups = append(st.Groups, g.spec())
	}
	sort.Slice(st.Groups, func(i, j int) bool { return st.Groups[i].ID < st.Groups[j].ID })
	for _, sn := range s.subnets {
		st.Subnets = append(st.Subnets, SubnetState{SubnetSpec: SubnetSpec{ID: sn.ID, VPCID: sn.VPCID, CIDR: sn.CIDR.String(), AZ: sn.AZ,
			Tags: cloneMap(sn.Tags), IPv6CIDR: sn.ipv6CIDR()}, Available: sn.Free(), Gateway: sn.Gateway().String()})
	}
	sort.Slice(st.Subnets, func(i, j int) bool { return st.Subnets[i].ID < st.Subnets[j].ID })
	for _, inst := range s.instances {
		is := InstanceState{Instance: s.instanceViewLocked(inst), Tags: cloneMap(inst.Tags)}
		for id := range inst.attached {
			is.ENIs = append(is.ENIs, id)
		}
		sort.Strings(is.ENIs)
		st.Instances = append(st.Instances, is)
	}
	sort.Slice(st.Instances, func(i, j int) bool { return st.Instances[i].ID < st.Instances[j].ID })
	for _, e := range s.enis {
		st.ENIs = append(st.ENIs, s.eniStateLocked(e))
	}
	sort.Slice(st.ENIs, func(i, j int) bool { return st.ENIs[i].ID < st.ENIs[j].ID })
	return st
}
