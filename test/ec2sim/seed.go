package ec2sim

import (
	"encoding/json"
	"fmt"
	"os"
)

// Seed is an initial state, as cmd/ec2sim reads it from a JSON file.
type Seed struct {
	VPCs []struct {
		ID   string `json:"id"`
		CIDR string `json:"cidr"`
	} `json:"vpcs"`
	Subnets   []SubnetSpec   `json:"subnets"`
	Instances []InstanceSpec `json:"instances"`
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
	sd.VPCs = append(sd.VPCs, struct {
		ID   string `json:"id"`
		CIDR string `json:"cidr"`
	}{DefaultVPC, "10.0.0.0/16"})
	sd.Subnets = []SubnetSpec{
		{ID: DefaultSubnetA, VPCID: DefaultVPC, CIDR: "10.0.0.0/19", AZ: region + "a"},
		{ID: DefaultSubnetB, VPCID: DefaultVPC, CIDR: "10.0.32.0/19", AZ: region + "b"},
	}
	sd.Instances = []InstanceSpec{{ID: DefaultInstance, Type: "m5.large", SubnetID: DefaultSubnetA}}
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

// Load adds a seed's VPCs, subnets and instances, returning the instances.
func (s *Sim) Load(sd Seed) ([]Instance, error) {
	for _, v := range sd.VPCs {
		if err := s.AddVPC(v.ID, v.CIDR); err != nil {
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
