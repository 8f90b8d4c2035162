// Package policywatch is the agent's NetworkPolicy enforcement: it watches Pods, Namespaces and
// NetworkPolicies with client-go informers, feeds them to a netpol.Compiler, and writes each changed pod's
// compiled state through a dptypes.PolicyDriver (the bpf datapath's maps).
//
// The first lists are fed between the Compiler's Hold and Flush, so each pod of the node is compiled once;
// until they are in, and whenever the API server is unreachable, the maps keep what was written last (they
// are pinned, and outlive the agent).
//
// A pod's first packet: the Watcher is the controller's PodGate. An ADD's pod is not yet in status.podIPs
// (kubelet writes it after the ADD answers), so the gate waits, bounded, for the watch to report the pod
// with the ADD's UID, compiles it at the address the IPAM assigned, writes its state and only then lets the
// controller bring the pod up. Until status.podIPs names an address, the pod's events keep that assigned
// address.
//
// A pod whose state cannot be written is isolated, allowing nothing (the datapath fails closed); the
// Watcher reports it as a Warning Event on each policy that selects the pod, on its status line and in the
// eniwire_policy_failed_pods gauge, and changes nothing else.
package policywatch
