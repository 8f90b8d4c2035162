package ec2sim

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func TestIPv6AssignsDrawFromTheirOwnTokenBucket(t *testing.T) {
	if got := DefaultBucket("AssignIpv6Addresses"); got != (BucketSpec{100, 5}) {
		t.Errorf("AssignIpv6Addresses bucket = %+v, want AWS's 100/5", got)
	}
	if got := DefaultBucket("UnassignIpv6Addresses"); got != (BucketSpec{50, 5}) {
		t.Errorf("UnassignIpv6Addresses bucket = %+v, want the mutating actions' 50/5", got)
	}
	w := newDualStackWorld(t, func(c *Config) { c.Throttling = true })
	w.sim.SetBucket("AssignIpv6Addresses", BucketSpec{Capacity: 1, RefillPerSec: 0.001})
	ctx := ctxT(t)
	eni := w.inst.PrimaryENI
	w.assignIPv6(t, eni, ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)})
	_, err := w.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6PrefixCount: aws.Int32(1)})
	wantAPIError(t, err, CodeRequestLimitExceeded, "Request limit exceeded.", http.StatusServiceUnavailable)
	if st, _ := w.sim.ENI(eni); len(st.IPv6Prefixes) != 1 {
		t.Errorf("the throttled call changed the ENI: prefixes %v", st.IPv6Prefixes)
	}
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eni,
		SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
		t.Errorf("another action's bucket was drained too: %v", err)
	}
	if c := w.sim.Counters()["AssignIpv6Addresses"]; c.Calls != 2 || c.Throttled != 1 {
		t.Errorf("counters = %+v, want 2 calls, 1 throttled", c)
	}
}

// The faults of faults.go apply to the IPv6 calls as to every other: a dropped answer or a server error
// after the change leaves the change made, a scripted error leaves nothing.
func TestFaultsCoverTheIPv6Calls(t *testing.T) {
	w := newDualStackWorld(t, nil)
	ctx := ctxT(t)
	eni := w.inst.PrimaryENI
	prefixes := func() []string { st, _ := w.sim.ENI(eni); return st.IPv6Prefixes }

	w.sim.Faults().DropResponses("AssignIpv6Addresses", 1)
	if _, err := w.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6PrefixCount: aws.Int32(1)}); err == nil {
		t.Fatal("a dropped answer reached the client")
	}
	if got := prefixes(); len(got) != 1 {
		t.Fatalf("after a dropped answer the ENI holds %v, want the one prefix the call made", got)
	}

	w.sim.Faults().FailAfterApply("AssignIpv6Addresses", CodeInternalError, 1)
	_, err := w.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6PrefixCount: aws.Int32(1)})
	wantAPIError(t, err, CodeInternalError, "", http.StatusInternalServerError)
	if got := prefixes(); len(got) != 2 {
		t.Fatalf("after InternalError-after-apply the ENI holds %v, want 2 prefixes", got)
	}

	w.sim.Faults().Script("UnassignIpv6Addresses", CodeInternalError, 1)
	_, err = w.ec2.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eni, Ipv6Prefixes: prefixes()})
	wantAPIError(t, err, CodeInternalError, "", http.StatusInternalServerError)
	if got := prefixes(); len(got) != 2 {
		t.Fatalf("a scripted failure unassigned prefixes: %v left", got)
	}
	c := w.sim.Counters()
	if a, u := c["AssignIpv6Addresses"], c["UnassignIpv6Addresses"]; a.Dropped != 1 || a.Errors[CodeInternalError] != 1 || u.Errors[CodeInternalError] != 1 {
		t.Errorf("counters: assign %+v, unassign %+v", a, u)
	}
}
