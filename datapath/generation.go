package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// nextPolicyGeneration increments the policy generation (bpf/maps.h, policy_generation) after a change of a
// pod's flags as the programs see them: every established flow of an isolated pod is then judged again on
// its next packet, and keeps its verdict until the next change. The caller holds policies.mu, and has
// written the flags before: a packet reads the generation before the flags, so one that judged the old
// flags cannot record the new generation.
func (d *Datapath) nextPolicyGeneration() error {
	ps := &d.policies
	next := ps.generation + 1
	if err := d.objs.PolicyGeneration.Update(uint32(0), next, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("writing the policy generation: %w", err)
	}
	ps.generation = next
	return nil
}
