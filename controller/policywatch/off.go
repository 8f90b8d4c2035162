package policywatch

import (
	"context"
	"errors"
	"net/netip"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// ClearAll clears the policy state of every address in pods: what the agent does with enforcement off, so
// that no pod keeps the isolation an earlier agent wrote into the pinned maps. It returns every failure.
func ClearAll(ctx context.Context, d dptypes.PolicyDriver, pods []netip.Addr) error {
	var errs []error
	for _, a := range pods {
		if err := d.ClearPodPolicy(ctx, a); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
