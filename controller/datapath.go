package controller

import (
	"context"
	"net/netip"
)

// ENI is what the datapath needs to know about a usable ENI.
type ENI struct {
	ID          string
	MAC         string
	DeviceIndex int
	Primary     bool
	SubnetCIDR  string
	// Gateway is the subnet's router: its first host address.
	Gateway string
}

// Pod is what the datapath needs to know about one assignment.
type Pod struct {
	ContainerID string
	IfName      string
	Netns       string
	IP          string
	HostVeth    string
	HostIfindex int
	ENI         ENI
}

// Datapath is how the controller moves packets for pods and ENIs; the agent wires an implementation. Every
// method must be idempotent: the controller calls them again after a restart and on repeated requests.
type Datapath interface {
	ENIUp(ctx context.Context, eni ENI) error
	ENIDown(ctx context.Context, eni ENI) error
	PodUp(ctx context.Context, pod Pod) error
	PodDown(ctx context.Context, pod Pod) error
}

// NoDatapath does nothing: for tests of the IPAM alone and for fleet simulations.
type NoDatapath struct{}

func (NoDatapath) ENIUp(context.Context, ENI) error   { return nil }
func (NoDatapath) ENIDown(context.Context, ENI) error { return nil }
func (NoDatapath) PodUp(context.Context, Pod) error   { return nil }
func (NoDatapath) PodDown(context.Context, Pod) error { return nil }

// Gateway returns the first host address of cidr (the VPC router of that subnet), or "" if cidr is invalid.
func Gateway(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	return p.Masked().Addr().Next().String()
}
