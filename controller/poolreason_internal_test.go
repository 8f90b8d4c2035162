package controller

import (
	"fmt"
	"testing"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/subnet"
)

// With subnet discovery on, a full subnet that refused a new ENI leaves no candidate, and the pool waits with
// "no subnet with free addresses": the subnet's exhaustion, and the reason says so (the real-node case 1c saw
// NoSubnetForENI there). Other placement refusals (custom networking's ENIConfig) keep NoSubnetForENI.
func TestNoCandidateSubnetForWantOfAddressesIsTheSubnetsExhaustion(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no candidate with free addresses", fmt.Errorf("%w: %w", subnet.ErrNoPlacement,
			fmt.Errorf("placing a new ENI: %w (candidates: subnet-1)", subnet.ErrNoSubnet)), api.PoolSubnetExhausted},
		{"no ENIConfig", fmt.Errorf("%w: custom networking: no ENIConfig named default", subnet.ErrNoPlacement), api.PoolNoSubnet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reasonOf(tc.err); got != tc.want {
				t.Errorf("reasonOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
