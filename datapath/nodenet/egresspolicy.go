package nodenet

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// egressPolicies makes an IPv6 pod's IPv4 egress address (dptypes.IPv4EgressRange) carry the pod's
// NetworkPolicy: the policy watch knows the pod by the address Kubernetes lists (its IPv6 one), while what
// the pod sends to IPv4 peers leaves from the egress address, which eniw_forward judges by that address's
// own pods entry. Without its flags the pod's IPv4 egress would be judged as a pod's that no policy selects.
// mu orders every policy change of a pod with the pod's setup, so the egress entry never keeps a policy the
// pod has left.
type egressPolicies struct {
	mu     sync.Mutex
	egress map[netip.Addr]netip.Addr        // pod address -> its IPv4 egress address, for pods up
	policy map[netip.Addr]dptypes.PodPolicy // pod address -> the policy last set, for isolated pods
}

// SetPodPolicy makes the pod's NetworkPolicy p in the programs' maps (datapath.Datapath.SetPodPolicy), for its
// IPv4 egress address too: it returns a *datapath.PolicyTooLargeError, the pod left allowing nothing, when p
// does not fit.
func (b *BPF) SetPodPolicy(ctx context.Context, pod netip.Addr, p dptypes.PodPolicy) error {
	ep := &b.egressPolicies
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if p.Isolated() {
		ep.policy[pod] = p
	} else {
		delete(ep.policy, pod)
	}
	err := b.dp.SetPodPolicy(ctx, pod, p)
	if egress, ok := ep.egress[pod]; ok {
		err = errors.Join(err, b.dp.SetPodPolicy(ctx, egress, p))
	}
	return err
}

// ClearPodPolicy makes the pod, and its IPv4 egress address, not isolated.
func (b *BPF) ClearPodPolicy(ctx context.Context, pod netip.Addr) error {
	ep := &b.egressPolicies
	ep.mu.Lock()
	defer ep.mu.Unlock()
	delete(ep.policy, pod)
	err := b.dp.ClearPodPolicy(ctx, pod)
	if egress, ok := ep.egress[pod]; ok {
		err = errors.Join(err, b.dp.ClearPodPolicy(ctx, egress))
	}
	return err
}

// followPod gives a pod's IPv4 egress address the pod's policy, set before the pod came up (the policy gate
// sets it before PodUp), and keeps it following from now on. It runs before the address's pods entry is
// written, which takes the flags. A pod without an egress address needs nothing.
func (b *BPF) followPod(ctx context.Context, pod dptypes.Pod) error {
	if !pod.EgressIP.IsValid() {
		return nil
	}
	ep := &b.egressPolicies
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.egress[pod.IP] = pod.EgressIP
	if p, ok := ep.policy[pod.IP]; ok {
		return b.dp.SetPodPolicy(ctx, pod.EgressIP, p)
	}
	return nil
}

// forgetPod stops following a pod that went down (its entries' policies go with them, DeletePod).
func (b *BPF) forgetPod(pod dptypes.Pod) {
	ep := &b.egressPolicies
	ep.mu.Lock()
	defer ep.mu.Unlock()
	delete(ep.egress, pod.IP)
	delete(ep.policy, pod.IP)
}
