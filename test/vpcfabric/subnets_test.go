package vpcfabric

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/test/ec2sim"
)

const (
	podBlock      = "100.64.0.0/16"
	podSubnetCIDR = "100.64.0.0/24"
	podSubnetID   = "subnet-0fab000000006401"
)

// newPodWorld is newWorld with the secondary block 100.64.0.0/16 associated to the VPC and a pod subnet
// in it, in the node's zone.
func newPodWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, func(sim *ec2sim.Sim) error {
		if _, err := sim.AddVPCCIDRBlock(vpcID, podBlock); err != nil {
			return err
		}
		return sim.AddSubnet(ec2sim.SubnetSpec{ID: podSubnetID, VPCID: vpcID, CIDR: podSubnetCIDR,
			Tags: map[string]string{ec2sim.TagCNIRole: "1"}})
	})
}

// TestENIInASecondaryBlockSubnetIsReachable attaches an ENI of a 100.64 subnet to a node through the SDK
// and reaches its addresses from the VPC host and from a second node, as those of the node's own subnet.
func TestENIInASecondaryBlockSubnetIsReachable(t *testing.T) {
	w := newPodWorld(t)
	ctx := waitCtx(t)
	api := w.ec2Client()
	nl, err := netlink.NewHandleAt(mustNS(t, w.node.NetnsPath))
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	vpcHost := w.fab.VPCHost()
	pod := netip.MustParsePrefix(podSubnetCIDR)
	gw := netip.MustParseAddr("100.64.0.1")

	other, err := w.sim.AddInstance(ec2sim.InstanceSpec{Type: "t3.medium", SubnetID: w.inst.SubnetID})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.fab.WaitNode(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fab.WaitIP(ctx, b.PrimaryIP); err != nil {
		t.Fatal(err)
	}

	created, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(podSubnetID),
		SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatalf("creating an ENI in the pod subnet: %v", err)
	}
	ni := created.NetworkInterface
	eniID, mac := aws.ToString(ni.NetworkInterfaceId), aws.ToString(ni.MacAddress)
	primary := netip.MustParseAddr(aws.ToString(ni.PrivateIpAddress))
	var secondary netip.Addr
	for _, a := range ni.PrivateIpAddresses {
		if !aws.ToBool(a.Primary) {
			secondary = netip.MustParseAddr(aws.ToString(a.PrivateIpAddress))
		}
	}
	if !pod.Contains(primary) || !pod.Contains(secondary) {
		t.Fatalf("ENI addresses %s, %s outside %s", primary, secondary, pod)
	}
	if _, err := api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{DeviceIndex: aws.Int32(1),
		InstanceId: aws.String(w.inst.ID), NetworkInterfaceId: aws.String(eniID)}); err != nil {
		t.Fatalf("attaching: %v", err)
	}
	if err := w.fab.WaitENI(ctx, w.inst.ID, mac); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []netip.Addr{primary, secondary} {
		if err := w.fab.WaitIP(ctx, ip); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the router routes both addresses of the 100.64 ENI through its veth", func(t *testing.T) {
		routes, err := w.fab.RouterRoutes(eniID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range []netip.Addr{primary, secondary} {
			if !slices.Contains(routes, netip.PrefixFrom(ip, 32)) {
				t.Errorf("routes via the ENI's veth = %v, want %s/32", routes, ip)
			}
		}
		checkDelivery(t, w.fab, eniID, mac)
	})

	t.Run("IMDS in the node shows the ENI's pod subnet and both VPC blocks", func(t *testing.T) {
		base := "network/interfaces/macs/" + mac + "/"
		for path, want := range map[string]string{
			base + "subnet-id": podSubnetID, base + "subnet-ipv4-cidr-block": podSubnetCIDR,
			base + "vpc-ipv4-cidr-blocks": "10.0.0.0/16\n" + podBlock,
		} {
			if got := nodeIMDS(t, w.node, path); got != want {
				t.Errorf("%s = %q, want %q", path, got, want)
			}
		}
	})

	// What the agent would do for the ENI: its addresses on eth1, and the hosts it talks to routed out of
	// eth1 via the pod subnet's gateway.
	configureSecondary(t, nl, primary, gw, vpcHost.IP, b.PrimaryIP)
	eth1, err := nl.LinkByName("eth1")
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.AddrAdd(eth1, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(secondary, 32))}); err != nil {
		t.Fatal(err)
	}

	t.Run("the VPC host dials both addresses and the node sees the VPC host", func(t *testing.T) {
		for _, ip := range []netip.Addr{primary, secondary} {
			addr, peers := echoServer(t, w.node.NetnsPath, ip)
			if err := dialFrom(vpcHost.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
				t.Fatalf("connecting from the VPC host to %s: %v", addr, err)
			}
			if got := <-peers; got != vpcHost.IP {
				t.Errorf("node saw source %s, want %s", got, vpcHost.IP)
			}
		}
	})

	t.Run("another node dials the 100.64 address", func(t *testing.T) {
		addr, peers := echoServer(t, w.node.NetnsPath, primary)
		if err := dialFrom(b.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
			t.Fatalf("connecting from node %s to %s: %v", other.ID, addr, err)
		}
		if got := <-peers; got != b.PrimaryIP {
			t.Errorf("node saw source %s, want %s", got, b.PrimaryIP)
		}
	})

	t.Run("the 100.64 address reaches the VPC host out of its own ENI", func(t *testing.T) {
		addr, peers := echoServer(t, vpcHost.NetnsPath, vpcHost.IP)
		if err := dialFrom(w.node.NetnsPath, secondary, "eth1", addr, 5*time.Second); err != nil {
			t.Fatalf("connecting from %s out of eth1: %v", secondary, err)
		}
		if got := <-peers; got != secondary {
			t.Errorf("VPC host saw source %s, want %s", got, secondary)
		}
	})
}
