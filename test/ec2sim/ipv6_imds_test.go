package ec2sim

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func wantIMDS404(t *testing.T, c *imds.Client, path string) {
	t.Helper()
	if v, err := imdsGet(t, c, path); err == nil || !strings.Contains(err.Error(), "StatusCode: 404") {
		t.Fatalf("GET %s = %q, %v; want 404", path, v, err)
	}
}

func TestIMDSAnswersAnENIsIPv6AddressesPrefixesAndBlocks(t *testing.T) {
	w := newDualStackWorld(t, nil)
	c := w.srv.IMDSClient(t, w.inst.ID)
	base := "network/interfaces/macs/" + w.inst.PrimaryMAC + "/"
	if got := mustIMDS(t, c, base+"subnet-ipv6-cidr-blocks"); got != DualStackSubnetAIPv6 {
		t.Errorf("subnet-ipv6-cidr-blocks = %q, want %q", got, DualStackSubnetAIPv6)
	}
	if got := mustIMDS(t, c, base+"vpc-ipv6-cidr-blocks"); got != DualStackVPCIPv6 {
		t.Errorf("vpc-ipv6-cidr-blocks = %q, want %q", got, DualStackVPCIPv6)
	}
	wantIMDS404(t, c, base+"ipv6s")
	wantIMDS404(t, c, base+"ipv6-prefix")
	wantIMDS404(t, c, "ipv6")
	if keys := strings.Fields(mustIMDS(t, c, base)); slices.Contains(keys, "ipv6s") || slices.Contains(keys, "ipv6-prefix") ||
		!slices.Contains(keys, "subnet-ipv6-cidr-blocks") || !slices.Contains(keys, "vpc-ipv6-cidr-blocks") {
		t.Errorf("the MAC's keys before any assignment: %v", keys)
	}

	prefix := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}).AssignedIpv6Prefixes[0]
	addrs := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(2)}).AssignedIpv6Addresses
	if got := mustIMDS(t, c, base+"ipv6-prefix"); got != prefix {
		t.Errorf("ipv6-prefix = %q, want %q", got, prefix)
	}
	if got := strings.Fields(mustIMDS(t, c, base+"ipv6s")); !slices.Equal(got, addrs) {
		t.Errorf("ipv6s = %v, want %v", got, addrs)
	}
	if keys := strings.Fields(mustIMDS(t, c, base)); !slices.Contains(keys, "ipv6s") || !slices.Contains(keys, "ipv6-prefix") {
		t.Errorf("the MAC's keys after the assignments: %v", keys)
	}
	if got := mustIMDS(t, c, "ipv6"); got != addrs[0] {
		t.Errorf("ipv6 (the primary ENI's first IPv6 address) = %q, want %q", got, addrs[0])
	}
	if keys := strings.Fields(mustIMDS(t, c, "")); !slices.Contains(keys, "ipv6") {
		t.Errorf("the top-level keys lack ipv6: %v", keys)
	}

	// IMDS's own endpoint attributes a caller by its source address: one inside the /80 is this instance.
	inside := netip.MustParsePrefix(prefix).Addr().Next().Next()
	if id, ok := w.sim.instanceOfRemote(netip.AddrPortFrom(inside, 40000).String()); !ok || id != w.inst.ID {
		t.Errorf("a caller from %s is %q (%v), want %s", inside, id, ok, w.inst.ID)
	}
	if _, err := w.ec2.UnassignIpv6Addresses(ctxT(t), &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &w.inst.PrimaryENI,
		Ipv6Prefixes: []string{prefix}}); err != nil {
		t.Fatal(err)
	}
	wantIMDS404(t, c, base+"ipv6-prefix")
}

func TestIMDSHasNoIPv6KeysOnAnIPv4OnlySubnet(t *testing.T) {
	w := newWorld(t, nil)
	c := w.srv.IMDSClient(t, w.inst.ID)
	base := "network/interfaces/macs/" + w.inst.PrimaryMAC + "/"
	for _, k := range []string{"ipv6s", "ipv6-prefix", "subnet-ipv6-cidr-blocks", "vpc-ipv6-cidr-blocks"} {
		wantIMDS404(t, c, base+k)
	}
}

func TestIMDSShowsNewIPv6PrefixesOnlyAfterTheLag(t *testing.T) {
	w := newDualStackWorld(t, nil)
	const lag = 300 * time.Millisecond
	w.sim.Faults().SetIMDSLag(lag)
	c := w.srv.IMDSClient(t, w.inst.ID)
	path := "network/interfaces/macs/" + w.inst.PrimaryMAC + "/ipv6-prefix"
	assignedAt := time.Now()
	prefix := w.assignIPv6(t, w.inst.PrimaryENI, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}).AssignedIpv6Prefixes[0]
	if v, err := imdsGet(t, c, path); err == nil && time.Since(assignedAt) < lag {
		t.Fatalf("ipv6-prefix = %q before the lag passed", v)
	}
	waitFor(t, "the IPv6 prefix in IMDS", func() bool {
		v, err := imdsGet(t, c, path)
		return err == nil && v == prefix
	})
}
