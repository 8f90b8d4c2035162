package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// untaggedPrimary is IAM for a primary ENI without the cluster tag: the policy allows
// AssignPrivateIpAddresses only on ENIs that carry it, so EC2 refuses the call on the primary.
type untaggedPrimary struct {
	ec2client.EC2API
	primary string
}

func (u untaggedPrimary) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, o ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	if aws.ToString(in.NetworkInterfaceId) == u.primary {
		return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
	}
	return u.EC2API.AssignPrivateIpAddresses(ctx, in, o...)
}

// TestAPrimaryENIThatRefusesIPsLeavesPodsToSecondaryENIs: the primary ENI was launched without the cluster
// tag, so the IAM policy denies assigning IPs to it. The pool must fall back to secondary ENIs and say why,
// instead of backing off for ever with no pod IP.
func TestAPrimaryENIThatRefusesIPsLeavesPodsToSecondaryENIs(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(fastConfig(w.dir), untaggedPrimary{EC2API: w.ec2(nil), primary: w.inst.PrimaryENI}, nil)
	waitReady(t, r.node)
	a := assignRetrying(t, r.node, "pod-0")
	if a.ENI == w.inst.PrimaryENI {
		t.Fatalf("pod-0 got %s of the primary ENI, which refuses IPs", a.IP)
	}
	eventually(t, 10*time.Second, "a status that names the primary ENI", func() error {
		if s := r.node.Status().PoolStatus; !strings.Contains(s, "primary ENI") {
			return fmt.Errorf("pool status %q", s)
		}
		return nil
	})
}
