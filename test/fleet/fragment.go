package fleet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// The fragmented scenario's subnets are filled first by legacy nodes: m5.24xlarge instances running the AWS VPC
// CNI in secondary-IP mode, every ENI full of single IPs, which EC2 (and the simulator, whose subnets hand
// addresses out across the whole range in this scenario) scatters over the subnet. Legacy nodes are added until
// no aligned /28 is left free, or until the free addresses would no longer hold twice the fleet's pods.
// The fill runs with throttling off and its calls are not counted in the scenario's.

// fillType is the legacy nodes' instance type: 15 ENIs x 50 addresses.
const fillType = "m5.24xlarge"

// fillStats say how fragmented the subnets were when the fleet started; the report prints them.
type fillStats struct {
	Nodes        int `json:"legacy_nodes"`
	IPs          int `json:"legacy_ips"`
	FreeAddrs    int `json:"free_addresses"`
	FreePrefixes int `json:"free_prefixes"`
}

// subnetUse tracks which addresses of one subnet are taken, and how many /28s are wholly free.
type subnetUse struct {
	base     netip.Addr
	size     int
	used     []bool
	perBlock []int
	free     int
}

func newSubnetUse(cidr string) (*subnetUse, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("parsing subnet CIDR %q: %w", cidr, err)
	}
	size := 1 << (32 - p.Bits())
	u := &subnetUse{base: p.Masked().Addr(), size: size, used: make([]bool, size), perBlock: make([]int, size/16), free: size - 5}
	for _, off := range []int{0, 1, 2, 3, size - 1} { // AWS's reserved addresses
		u.used[off] = true
		u.perBlock[off/16]++
	}
	return u, nil
}

func (u *subnetUse) take(ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	b, o := a.As4(), u.base.As4()
	off := int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) - int(uint32(o[0])<<24|uint32(o[1])<<16|uint32(o[2])<<8|uint32(o[3]))
	if off < 0 || off >= u.size || u.used[off] {
		return
	}
	u.used[off] = true
	u.perBlock[off/16]++
	u.free--
}

func (u *subnetUse) freePrefixes() int {
	n := 0
	for _, c := range u.perBlock {
		if c == 0 {
			n++
		}
	}
	return n
}

// fragment fills the subnets of insts with legacy nodes' single IPs.
func (f *fleet) fragment(ctx context.Context, insts []ec2sim.Instance) error {
	snap := f.w.sim.Snapshot()
	uses := map[string]*subnetUse{}
	demand := map[string]int{}
	for _, inst := range insts {
		demand[inst.SubnetID] += f.opts.PodsPerNode
	}
	for _, sn := range snap.Subnets {
		if demand[sn.ID] == 0 {
			continue
		}
		u, err := newSubnetUse(sn.CIDR)
		if err != nil {
			return err
		}
		uses[sn.ID] = u
	}
	for _, e := range snap.ENIs {
		if u := uses[e.SubnetID]; u != nil {
			for _, ip := range e.IPs {
				u.take(ip)
			}
		}
	}
	f.w.sim.SetThrottling(false)
	defer f.w.sim.SetThrottling(true)
	api := f.w.sdk(retry.NewStandard(), nil)
	it, _ := ec2sim.LookupInstanceType(fillType)
	per := int32(it.IPv4PerENI - 1)
	for id, u := range uses {
		for u.freePrefixes() > 0 && u.free-int(per)*it.MaxENIs >= 2*demand[id] {
			inst, err := f.w.sim.AddInstance(ec2sim.InstanceSpec{Type: fillType, SubnetID: id})
			if err != nil {
				return fmt.Errorf("adding a legacy node: %w", err)
			}
			f.fill.Nodes++
			u.take(inst.PrimaryIP)
			out, err := api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(inst.PrimaryENI),
				SecondaryPrivateIpAddressCount: aws.Int32(per)})
			if err != nil {
				return fmt.Errorf("filling legacy node %s: %w", inst.ID, err)
			}
			for _, a := range out.AssignedPrivateIpAddresses {
				u.take(aws.ToString(a.PrivateIpAddress))
				f.fill.IPs++
			}
			for idx := int32(1); idx < int32(it.MaxENIs) && u.freePrefixes() > 0; idx++ {
				if err := f.fillENI(ctx, api, inst, idx, per, u); err != nil {
					return err
				}
			}
		}
	}
	for _, u := range uses {
		f.fill.FreeAddrs += u.free
		f.fill.FreePrefixes += u.freePrefixes()
	}
	f.progress("fragmented: %d legacy nodes hold %d single IPs; %d addresses and %d aligned /28s free", f.fill.Nodes,
		f.fill.IPs, f.fill.FreeAddrs, f.fill.FreePrefixes)
	return nil
}

// fillENI creates, attaches and marks DeleteOnTermination one ENI of a legacy node, full of single IPs.
func (f *fleet) fillENI(ctx context.Context, api *ec2.Client, inst ec2sim.Instance, idx, ips int32, u *subnetUse) error {
	out, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(inst.SubnetID),
		SecondaryPrivateIpAddressCount: aws.Int32(ips), Description: aws.String("aws-K8S-" + inst.ID)})
	if err != nil {
		return fmt.Errorf("creating an ENI of legacy node %s: %w", inst.ID, err)
	}
	ni := out.NetworkInterface
	for _, a := range ni.PrivateIpAddresses {
		u.take(aws.ToString(a.PrivateIpAddress))
		if !aws.ToBool(a.Primary) {
			f.fill.IPs++
		}
	}
	att, err := api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(inst.ID),
		NetworkInterfaceId: ni.NetworkInterfaceId, DeviceIndex: aws.Int32(idx)})
	if err != nil {
		return fmt.Errorf("attaching an ENI of legacy node %s: %w", inst.ID, err)
	}
	_, err = api.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: ni.NetworkInterfaceId,
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)}})
	if err != nil {
		return fmt.Errorf("marking an ENI of legacy node %s: %w", inst.ID, err)
	}
	return nil
}
