package controller

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/eniwire/eniwire/controller/api"
)

// PodGate is what must hold before a pod's datapath comes up. Every ADD asks it once the pod's IP is
// journaled and before the datapath's PodUp, so before the pod can send or receive a packet; an error fails
// the ADD, which gives the IP back. The agent wires its NetworkPolicy watch here (controller/policywatch):
// the pod's policy state is in the datapath's maps before its first packet. The controller knows nothing
// of policies: the gate gets the pod's identity, as the runtime passed it, and the address it was given.
// A gate with a method Status() string, asked once when the node is built, adds its line to the node's
// status (api.Status.NetworkPolicy).
type PodGate interface {
	BeforePodUp(ctx context.Context, pod api.PodIdentity, ips ...netip.Addr) error
}

// podStart passes the pod's gate, at every address of the pod (a dual-stack pod's two), then brings its
// datapath up.
func (p *ipam) podStart(ctx context.Context, a api.Assignment) error {
	if p.gate != nil {
		pod, err := podOf(a)
		if err != nil {
			return err
		}
		ips := []netip.Addr{pod.IP}
		if pod.IPv6.IsValid() {
			ips = append(ips, pod.IPv6)
		}
		if err := p.gate.BeforePodUp(ctx, a.Pod, ips...); err != nil {
			return fmt.Errorf("before pod %s/%s comes up at %v: %w", a.Pod.Namespace, a.Pod.Name, ips, err)
		}
	}
	return p.podUp(ctx, a)
}
