package controller_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/test/simworld"
)

// TestASlash80RemovedOutsideEniwireLeavesTheBooks: someone unassigns the node's /80 by hand (or another tool
// does). The reconcile finds EC2 no longer lists it, confirms it with a read by ENI id, takes it out of the
// books and reports the pods that held its addresses; the pool takes a new /80, and new pods get addresses
// of that one (issue 36 item 14: the books' /80 was never checked against EC2 again, and pods kept getting
// addresses EC2 no longer routed).
func TestASlash80RemovedOutsideEniwireLeavesTheBooks(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	r := w.start(ipv6Config(w.dir), nil, nil)
	waitReady(t, r.node)
	var old netip.Prefix
	eventually(t, 20*time.Second, "the node's /80", func() (err error) { old, err = w.primaryPrefix(); return err })
	before := assignRetrying(t, r.node, "pod-before")
	if a := netip.MustParseAddr(before.IP); !old.Contains(a) {
		t.Fatalf("pod-before got %s, outside the /80 %s", before.IP, old)
	}
	if _, err := w.ec2(nil).UnassignIpv6Addresses(context.Background(), &ec2.UnassignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(w.inst.PrimaryENI), Ipv6Prefixes: []string{old.String()}}); err != nil {
		t.Fatal(err)
	}
	var fresh netip.Prefix
	eventually(t, 60*time.Second, "the removed /80 out of the books and a new one in", func() error {
		for _, e := range r.node.Snapshot().ENIs {
			if !e.Primary {
				continue
			}
			if len(e.IPv6Prefixes) != 1 || e.IPv6Prefixes[0] == old.String() {
				return fmt.Errorf("the books' /80s %v (%s removed outside)", e.IPv6Prefixes, old)
			}
			fresh = netip.MustParsePrefix(e.IPv6Prefixes[0])
			return nil
		}
		return fmt.Errorf("no primary ENI in the books")
	})
	if p, err := w.primaryPrefix(); err != nil || p != fresh {
		t.Fatalf("EC2 shows %v (%v), the books %s", p, err, fresh)
	}
	after := assignRetrying(t, r.node, "pod-after")
	if a := netip.MustParseAddr(after.IP); !fresh.Contains(a) {
		t.Errorf("pod-after got %s, want an address of the new /80 %s", after.IP, fresh)
	}
	t.Logf("/80 %s removed outside eniwire; the node took %s; pod-after got %s", old, fresh, after.IP)
}
