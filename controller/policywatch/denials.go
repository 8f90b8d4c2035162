package policywatch

import (
	"net/netip"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Denial is a new flow a pod's policy denied, as the datapath reports it (rate-limited by the programs).
type Denial struct {
	Pod, Peer netip.Addr
	// Egress: the pod's egress rules denied it (the pod opened it); else its ingress rules.
	Egress   bool
	Protocol uint8
	// Port is the responder's port.
	Port uint16
}

// LogDenial logs a denied new flow with the pod's name, the peer, the port and the policies that isolate
// the pod, as the compiler knows them now.
func (w *Watcher) LogDenial(d Denial) {
	w.mu.Lock()
	pod, policies := w.podAt(d.Pod), w.compiler.Selecting(d.Pod)
	w.mu.Unlock()
	dir, from, to := "ingress", d.Peer, d.Pod
	if d.Egress {
		dir, from, to = "egress", d.Pod, d.Peer
	}
	port := portString(dptypes.PortRange{Protocol: d.Protocol, First: d.Port, Last: d.Port})
	if d.Protocol != 6 && d.Protocol != 17 && d.Protocol != 132 {
		port = portString(dptypes.PortRange{Protocol: d.Protocol, First: dptypes.AllPorts[0], Last: dptypes.AllPorts[1]})
	}
	w.log.Info("policy denied a new flow", "pod", pod, "pod_ip", d.Pod, "direction", dir, "from", from, "to", to,
		"port", port, "policies", policies)
}
