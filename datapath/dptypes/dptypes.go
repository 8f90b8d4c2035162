// Package dptypes is the datapath's contract (the top layer in package datapath's map of layers), what the
// controller and the datapath share: the Driver interface through which the controller moves packets for pods
// and ENIs, and the ENI and Pod it describes them with. It is a leaf: it
// imports nothing of eniwire, so the controller can drive a datapath without importing one, and a datapath
// can be built and tested without the controller. The agent wires an implementation (datapath/nodenet's BPF,
// datapath/hostroute's Routes) into the controller.
package dptypes

import (
	"context"
	"errors"
	"net"
	"net/netip"
)

// ErrHostVethGone is wrapped by a PodUp (or Claim) that finds the pod's host veth gone or already being
// removed: the pair belonged to a released sandbox the agent was removing, so the ADD that found it must make
// a new one and ask again.
var ErrHostVethGone = errors.New("the pod's host veth is gone or being removed")

// ENI is what the datapath needs to know about a usable ENI. Its addresses are parsed: the controller turns
// the strings of its books and of EC2 into these once, and a datapath never parses.
type ENI struct {
	ID          string
	MAC         net.HardwareAddr
	DeviceIndex int
	Primary     bool
	Subnet      netip.Prefix
	// Gateway is the subnet's router: its first host address.
	Gateway netip.Addr
}

// IPv4EgressRange is the node-local range IPv6 pods' IPv4 egress addresses come from (IPv6 mode), as the AWS
// VPC CNI's: the controller hands them out, the host translates them to the node's IPv4.
var IPv4EgressRange = netip.MustParsePrefix("169.254.172.0/22")

// Pod is what the datapath needs to know about one assignment.
type Pod struct {
	ContainerID string
	IfName      string
	Netns       string
	IP          netip.Addr
	// EgressIP is an IPv6 pod's node-local IPv4 address (IPv6 mode), which the host translates to the node's
	// IPv4; the zero Addr for an IPv4 pod.
	EgressIP netip.Addr
	// IPv6 is a dual-stack pod's IPv6 address beside its IPv4 in IP, which IPv6ENI's /80 holds (the primary
	// ENI); the zero Addr otherwise.
	IPv6        netip.Addr
	IPv6ENI     ENI
	HostVeth    string
	HostIfindex int
	// ENI is the ENI whose address the pod holds; its MAC is nil when the books no longer know the ENI.
	ENI ENI
	// VPCOnly: every packet of the pod's IPv4 takes the VPC's way, to and from the node's other pods too,
	// and none is SNATed (a pod of a security-group set in strict mode, whose groups the VPC applies).
	VPCOnly bool
}

// Driver is how the controller moves packets for pods and ENIs; the agent wires an implementation. Every
// method must be idempotent: the controller calls them again after a restart and on repeated requests.
//
// A Driver that removes the pods' host veths itself (off the CNI DEL's critical path) says so with a method
// RemovesHostVeth() bool; the controller asks once, when it is built, and tells the plugin's DEL that the
// agent removes the veth.
//
// PodUp and PodDown refuse a Pod whose IP is not valid (the zero Addr, the only invalid one the type lets
// through) with an error, as ENIUp refuses an ENI without a MAC, subnet or gateway.
type Driver interface {
	ENIUp(ctx context.Context, eni ENI) error
	ENIDown(ctx context.Context, eni ENI) error
	PodUp(ctx context.Context, pod Pod) error
	PodDown(ctx context.Context, pod Pod) error
	// SetVPCCIDRs replaces the VPC's IPv4 blocks: pod traffic to them leaves by the pod's ENI and is never
	// source-NATed. The controller calls it when DescribeVpcs shows a changed set (a block associated later).
	SetVPCCIDRs(ctx context.Context, cidrs []netip.Prefix) error
}

// NoDriver does nothing: for tests of the IPAM alone and for fleet simulations.
type NoDriver struct{}

func (NoDriver) ENIUp(context.Context, ENI) error   { return nil }
func (NoDriver) ENIDown(context.Context, ENI) error { return nil }
func (NoDriver) PodUp(context.Context, Pod) error   { return nil }
func (NoDriver) PodDown(context.Context, Pod) error { return nil }

func (NoDriver) SetVPCCIDRs(context.Context, []netip.Prefix) error { return nil }
