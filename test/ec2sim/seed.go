package ec2sim

import (
	"encoding/json"
	"fmt"
	"os"
)

// Seed is an initial state, as cmd/ec2sim reads it from a JSON file.
type Seed struct {
	VPCs           []VPCSpec           `json:"vpcs"`
	SecurityGroups []SecurityGroupSpec `json:"securityGroups,omitempty"`
	Subnets        []SubnetSpec        `json:"subnets"`
	Instances      []InstanceSpec      `json:"instances"`
}

// VPCSpec is a VPC of a Seed: its primary CIDR, further associated blocks and tags.
type VPCSpec struct {
	ID         string   `json:"id"`
	CIDR       string   `json:"cidr"`
	CIDRBlocks []string `json:"cidrBlocks,omitempty"`
	// IPv6CIDRBlocks are the VPC's IPv6 /56s; "amazon" asks for an Amazon-provided one.
	IPv6CIDRBlocks []string          `json:"ipv6CidrBlocks,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
}

// Default ids of DefaultSeed.
const (
	DefaultVPC      = "vpc-0e1a1e00000000001"
	DefaultSubnetA  = "subnet-0e1a1e00000000001"
	DefaultSubnetB  = "subnet-0e1a1e00000000002"
	DefaultInstance = "i-0e1a1e00000000001"
)

// DefaultSeed is one VPC (10.0.0.0/16), two subnets in two zones and one m5.large instance.
func DefaultSeed(region string) Seed {
	var sd Seed
	sd.VPCs = []VPCSpec{{ID: DefaultVPC, CIDR: "10.0.0.0/16"}}
	sd.Subnets = []SubnetSpec{
		{ID: DefaultSubnetA, VPCID: DefaultVPC, CIDR: "10.0.0.0/19", AZ: region + "a"},
		{ID: DefaultSubnetB, VPCID: DefaultVPC, CIDR: "10.0.32.0/19", AZ: region + "b"},
	}
	sd.Instances = []InstanceSpec{{ID: DefaultInstance, Type: "m5.large", SubnetID: DefaultSubnetA}}
	return sd
}

// Ids of PodSubnetsSeed beyond DefaultSeed's.
const (
	DefaultSubnetC = "subnet-0e1a1e00000000003"
	PodSubnetA     = "subnet-0e1a1e00000006401"
	PodSubnetB     = "subnet-0e1a1e00000006402"
	PodSubnetC     = "subnet-0e1a1e00000006403"
	PodGroup       = "sg-0e1a1e00000000064"
)

// Tags of PodSubnetsSeed: the role tag subnet discovery looks for, and a cluster's ownership tag.
const (
	TagCNIRole    = "kubernetes.io/role/cni"
	TagClusterFmt = "kubernetes.io/cluster/%s"
	SeedCluster   = "eniwire"
)

// PodSubnetsSeed is DefaultSeed grown as clusters short of addresses grow their VPC: a third node subnet
// (10.0.64.0/19, zone c), the secondary block 100.64.0.0/16 with one pod subnet per zone (100.64.0.0/19,
// 100.64.32.0/19, 100.64.64.0/19) tagged kubernetes.io/role/cni=1 and kubernetes.io/cluster/eniwire=shared,
// a tagged VPC and a pod security group beside the VPC's default one. The instance is DefaultSeed's.
func PodSubnetsSeed(region string) Seed {
	sd := DefaultSeed(region)
	sd.VPCs[0].CIDRBlocks = []string{"100.64.0.0/16"}
	sd.VPCs[0].Tags = map[string]string{"Name": "eniwire-sim", fmt.Sprintf(TagClusterFmt, SeedCluster): "shared"}
	sd.SecurityGroups = []SecurityGroupSpec{{ID: PodGroup, VPCID: DefaultVPC, Name: "eniwire-pods",
		Description: "pods of the eniwire cluster", Tags: map[string]string{"Name": "eniwire-pods"}}}
	pod := func() map[string]string {
		return map[string]string{TagCNIRole: "1", fmt.Sprintf(TagClusterFmt, SeedCluster): "shared"}
	}
	sd.Subnets = append(sd.Subnets,
		SubnetSpec{ID: DefaultSubnetC, VPCID: DefaultVPC, CIDR: "10.0.64.0/19", AZ: region + "c"},
		SubnetSpec{ID: PodSubnetA, VPCID: DefaultVPC, CIDR: "100.64.0.0/19", AZ: region + "a", Tags: pod()},
		SubnetSpec{ID: PodSubnetB, VPCID: DefaultVPC, CIDR: "100.64.32.0/19", AZ: region + "b", Tags: pod()},
		SubnetSpec{ID: PodSubnetC, VPCID: DefaultVPC, CIDR: "100.64.64.0/19", AZ: region + "c", Tags: pod()})
	return sd
}

// The IPv6 blocks of DualStackSeed.
const (
	DualStackVPCIPv6     = "2600:1f14:e1a:e100::/56"
	DualStackSubnetAIPv6 = "2600:1f14:e1a:e101::/64"
	DualStackSubnetBIPv6 = "2600:1f14:e1a:e102::/64"
)

// DualStackSeed is DefaultSeed with IPv6, as an IPv6 EKS cluster's VPC has it: the VPC holds the /56
// DualStackVPCIPv6 and both subnets a /64 of it.
func DualStackSeed(region string) Seed {
	sd := DefaultSeed(region)
	sd.VPCs[0].IPv6CIDRBlocks = []string{DualStackVPCIPv6}
	sd.Subnets[0].IPv6CIDR = DualStackSubnetAIPv6
	sd.Subnets[1].IPv6CIDR = DualStackSubnetBIPv6
	return sd
}

// ReadSeed reads a Seed from a JSON file.
func ReadSeed(path string) (Seed, error) {
	var sd Seed
	b, err := os.ReadFile(path)
	if err != nil {
		return sd, fmt.Errorf("reading seed: %w", err)
	}
	if err := json.Unmarshal(b, &sd); err != nil {
		return sd, fmt.Errorf("decoding seed %s: %w", path, err)
	}
	return sd, nil
}

// Load adds a seed's VPCs (with their IPv4 and IPv6 blocks and tags), security groups, subnets and instances, returning
// the instances.
func (s *Sim) Load(sd Seed) ([]Instance, error) {
	for _, v := range sd.VPCs {
		if err := s.AddVPC(v.ID, v.CIDR); err != nil {
			return nil, fmt.Errorf("loading seed: %w", err)
		}
		for _, b := range v.CIDRBlocks {
			if _, err := s.AddVPCCIDRBlock(v.ID, b); err != nil {
				return nil, fmt.Errorf("loading seed: %w", err)
			}
		}
		for _, b := range v.IPv6CIDRBlocks {
			if b == "amazon" {
				b = ""
			}
			if _, err := s.AddVPCIPv6Block(v.ID, b); err != nil {
				return nil, fmt.Errorf("loading seed: %w", err)
			}
		}
		if len(v.Tags) > 0 {
			if err := s.SetTags(v.ID, v.Tags); err != nil {
				return nil, fmt.Errorf("loading seed: %w", err)
			}
		}
	}
	for _, g := range sd.SecurityGroups {
		if _, err := s.AddSecurityGroup(g); err != nil {
			return nil, fmt.Errorf("loading seed: %w", err)
		}
	}
	for _, sn := range sd.Subnets {
		if err := s.AddSubnet(sn); err != nil {
			return nil, fmt.Errorf("loading seed: %w", err)
		}
	}
	var out []Instance
	for _, spec := range sd.Instances {
		inst, err := s.AddInstance(spec)
		if err != nil {
			return nil, fmt.Errorf("loading seed: %w", err)
		}
		out = append(out, inst)
	}
	return out, nil
}
