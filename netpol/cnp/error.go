package cnp

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InvalidError is Parse refusing a policy: every problem it found, each at its field path
// (spec.egress[2].to[0].networks[1]). A refused policy applies not at all, never in part.
type InvalidError struct {
	Policy string
	Errs   field.ErrorList
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("ClusterNetworkPolicy %q refused: %v", e.Policy, e.Errs.ToAggregate())
}
