package vpcfabric

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/test/ec2sim"
)

const dbPort = 5432

// lineEcho serves at at inside a netns, echoing every line of every connection until the peer closes.
func lineEcho(t *testing.T, nsPath string, at netip.AddrPort) {
	t.Helper()
	l, err := Listen(nsPath, "tcp", at.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// exchange sends a line over c and reads it back.
func exchange(c net.Conn, line string) error {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return fmt.Errorf("echoed %q, want %q", got, line)
	}
	return nil
}

// holdIPv6 gives a node's eth0 an IPv6 address of its primary ENI, without duplicate address detection.
func holdIPv6(t *testing.T, node Node, a netip.Addr) {
	t.Helper()
	nl, err := netlink.NewHandleAt(mustNS(t, node.NetnsPath))
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	eth0, err := nl.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, 128)), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatal(err)
	}
}

// TestSecurityGroupsAdmitOnlyWhatTheirRulesName plays a database host in the VPC (the VPC host, in group db)
// that admits tcp/5432 only from the group db-clients: node a's ENI is in db-clients, node b's is not. The
// groups, their rules and the ENIs' groups are set through the real SDK at the node's EC2 endpoint.
func TestSecurityGroupsAdmitOnlyWhatTheirRulesName(t *testing.T) {
	w := newWorldWith(t, func(sim *ec2sim.Sim) error {
		if _, err := sim.AddVPCIPv6Block(vpcID, "2600:1f14:e0::/56"); err != nil {
			return err
		}
		_, err := sim.AddSubnetIPv6Block(subnetID, "2600:1f14:e0:1::/64")
		return err
	})
	ctx := waitCtx(t)
	api := w.ec2Client()
	vpcHost := w.fab.VPCHost()
	createGroup := func(name string) string {
		t.Helper()
		out, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(name),
			Description: aws.String(name), VpcId: aws.String(vpcID)})
		if err != nil {
			t.Fatalf("creating group %s: %v", name, err)
		}
		return aws.ToString(out.GroupId)
	}
	setGroups := func(eni string, groups ...string) {
		t.Helper()
		if _, err := api.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(eni), Groups: groups}); err != nil {
			t.Fatalf("setting the groups of %s: %v", eni, err)
		}
		if err := w.fab.WaitSecurityGroups(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dbFromClients := func(clients string) []types.IpPermission {
		return []types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(dbPort), ToPort: aws.Int32(dbPort),
			UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(clients)}}}}
	}

	clients, db := createGroup("db-clients"), createGroup("db")
	if _, err := api.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(db),
		IpPermissions: dbFromClients(clients)}); err != nil {
		t.Fatal(err)
	}
	if err := w.fab.SetVPCHostSecurityGroups(db); err != nil {
		t.Fatal(err)
	}
	a := w.node
	instB, err := w.sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: subnetID})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.fab.WaitNode(ctx, instB.ID)
	if err != nil {
		t.Fatal(err)
	}
	setGroups(w.inst.PrimaryENI, w.inst.SecurityGroups[0], clients)

	dbAddr := netip.AddrPortFrom(vpcHost.IP, dbPort)
	lineEcho(t, vpcHost.NetnsPath, dbAddr)
	lineEcho(t, vpcHost.NetnsPath, netip.AddrPortFrom(vpcHost.IP, dbPort+1))
	vpcHostDrops := func() uint64 {
		t.Helper()
		n, err := w.fab.VPCHostSecurityGroupDrops()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	dial := func(node Node, src netip.Addr, to netip.AddrPort, timeout time.Duration) (net.Conn, error) {
		var c net.Conn
		err := Do(node.NetnsPath, func() error {
			d := net.Dialer{Timeout: timeout}
			if src.IsValid() {
				d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
			}
			var err error
			c, err = d.Dial("tcp", to.String())
			return err
		})
		return c, err
	}
	// refused asserts that a connection from node to to is not admitted, and that the router counted it.
	refused := func(t *testing.T, node Node, src netip.Addr, to netip.AddrPort, drops func() uint64) {
		t.Helper()
		before := drops()
		if c, err := dial(node, src, to, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s reached %s", node.InstanceID, to)
		}
		if after := drops(); after <= before {
			t.Errorf("the drop counter stayed at %d", after)
		}
	}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"the ENI in db-clients reaches the database port", func(t *testing.T) {
			c, err := dial(a, netip.Addr{}, dbAddr, 5*time.Second)
			if err != nil {
				t.Fatalf("connecting from %s: %v", a.PrimaryIP, err)
			}
			defer c.Close()
			if err := exchange(c, "select 1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"an ENI outside db-clients is refused, and the VPC host's drops count it", func(t *testing.T) {
			refused(t, b, netip.Addr{}, dbAddr, vpcHostDrops)
		}},
		{"db-clients reaches only the port the rule names", func(t *testing.T) {
			refused(t, a, netip.Addr{}, netip.AddrPortFrom(vpcHost.IP, dbPort+1), vpcHostDrops)
		}},
		{"over IPv6 the group stands for its ENIs' IPv6 addresses as well", func(t *testing.T) {
			var held [2]netip.Addr
			for i, eni := range []string{w.inst.PrimaryENI, instB.PrimaryENI} {
				out, err := api.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni),
					Ipv6AddressCount: aws.Int32(1)})
				if err != nil {
					t.Fatal(err)
				}
				held[i] = netip.MustParseAddr(out.AssignedIpv6Addresses[0])
				if err := w.fab.WaitIP(ctx, held[i]); err != nil {
					t.Fatal(err)
				}
			}
			holdIPv6(t, a, held[0])
			holdIPv6(t, b, held[1])
			db6 := netip.AddrPortFrom(vpcHost.IPv6, dbPort)
			lineEcho(t, vpcHost.NetnsPath, db6)
			c, err := dial(a, held[0], db6, 10*time.Second)
			if err != nil {
				t.Fatalf("connecting from %s: %v", held[0], err)
			}
			defer c.Close()
			if err := exchange(c, "select 6"); err != nil {
				t.Fatal(err)
			}
			// b's node resolves the router first (a's dial did the same), so that its refused SYN leaves.
			if c, err := dial(b, held[1], netip.AddrPortFrom(held[0], 1), 3*time.Second); err == nil {
				c.Close()
			}
			refused(t, b, held[1], db6, vpcHostDrops)
		}},
		{"an established flow survives a revoke, a new one is refused", func(t *testing.T) {
			c, err := dial(a, netip.Addr{}, dbAddr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := exchange(c, "before"); err != nil {
				t.Fatal(err)
			}
			if _, err := api.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(db),
				IpPermissions: dbFromClients(clients)}); err != nil {
				t.Fatal(err)
			}
			if err := w.fab.WaitSecurityGroups(ctx); err != nil {
				t.Fatal(err)
			}
			if err := exchange(c, "after"); err != nil {
				t.Fatalf("the flow opened before the revoke broke: %v", err)
			}
			refused(t, a, netip.Addr{}, dbAddr, vpcHostDrops)
		}},
		{"an ENI whose groups admit no egress is dropped leaving, and its own drops count it", func(t *testing.T) {
			quiet := createGroup("quiet")
			if _, err := api.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(quiet),
				IpPermissions: []types.IpPermission{{IpProtocol: aws.String("-1"), IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}},
					Ipv6Ranges: []types.Ipv6Range{{CidrIpv6: aws.String("::/0")}}}}}); err != nil {
				t.Fatal(err)
			}
			setGroups(instB.PrimaryENI, quiet)
			addr, peers := echoServer(t, a.NetnsPath, a.PrimaryIP) // a's default group admits everything in
			refused(t, b, netip.Addr{}, addr, func() uint64 {
				n, err := w.fab.SecurityGroupDrops(instB.PrimaryENI)
				if err != nil {
					t.Fatal(err)
				}
				return n
			})
			select {
			case p := <-peers:
				t.Errorf("node a accepted a connection from %s", p)
			default:
			}
			// What the router itself answers is not subject to groups.
			if got := nodeIMDS(t, b, "instance-id"); got != instB.ID {
				t.Errorf("IMDS answered b with %q, want %s", got, instB.ID)
			}
		}},
		{"rules of every protocol load, and a group's chains go with its last carrier", func(t *testing.T) {
			every := createGroup("every")
			rules := ec2sim.SecurityGroupRules{Ingress: []ec2sim.Permission{
				{Protocol: ec2sim.ProtocolTCP, FromPort: 1000, ToPort: 2000, CIDRs: []string{"10.0.0.0/16", "2600:1f14:e0::/56"}},
				{Protocol: ec2sim.ProtocolUDP, FromPort: 53, ToPort: 53, Groups: []string{clients, every}},
				{Protocol: ec2sim.ProtocolICMP, FromPort: 8, ToPort: -1, CIDRs: []string{"0.0.0.0/0"}},
				{Protocol: ec2sim.ProtocolICMP, FromPort: 3, ToPort: 4, CIDRs: []string{"0.0.0.0/0"}},
				{Protocol: ec2sim.ProtocolICMPv6, FromPort: -1, ToPort: -1, CIDRs: []string{"::/0"}},
				{Protocol: "47", CIDRs: []string{"10.0.0.0/8"}},
			}, Egress: ec2sim.AllTraffic()}
			if err := w.sim.SetSecurityGroupRules(every, rules); err != nil {
				t.Fatal(err)
			}
			if err := w.fab.SetVPCHostSecurityGroups(db, every); err != nil {
				t.Fatalf("loading the rules: %v", err)
			}
			if err := w.fab.WaitSecurityGroups(ctx); err != nil {
				t.Fatal(err)
			}
			table := func() string {
				_, path := w.fab.Router()
				out, err := nft(path, "", "list", "table", "inet", sgTable)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			if got := table(); !strings.Contains(got, groupChain(every, false)) || !strings.Contains(got, "tcp dport 1000-2000") {
				t.Fatalf("the table lacks the group's rules:\n%s", got)
			}
			if err := w.fab.SetVPCHostSecurityGroups(); err != nil {
				t.Fatal(err)
			}
			if got := table(); strings.Contains(got, groupChain(every, false)) || strings.Contains(got, "from_"+vpcHostLink) {
				t.Errorf("the VPC host's chains outlived its groups:\n%s", got)
			}
			if n, err := w.fab.VPCHostSecurityGroupDrops(); err != nil || n != 0 {
				t.Errorf("an unfiltered VPC host has drops %d, %v", n, err)
			}
		}},
		{"a terminated node's ENI leaves nothing behind in the table", func(t *testing.T) {
			link := routerLinkName(instB.PrimaryENI)
			if err := w.sim.TerminateInstance(instB.ID); err != nil {
				t.Fatal(err)
			}
			if err := w.fab.waitFor(ctx, "node b gone", func() bool { return w.fab.nodes[instB.ID] == nil }); err != nil {
				t.Fatal(err)
			}
			_, path := w.fab.Router()
			out, err := nft(path, "", "list", "table", "inet", sgTable)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, link) {
				t.Errorf("the table still names b's link %s:\n%s", link, out)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
	if err := w.fab.Err(); err != nil {
		t.Errorf("the fabric failed to apply events: %v", err)
	}
}
