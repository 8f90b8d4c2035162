// Package cluster compiles ClusterNetworkPolicies (read by package netpol/cnp) for the pods of one node:
// for each of them, the Admin and Baseline rules of each direction with their peers resolved into
// prefixes and their named ports into numbers (Rules), which Combine layers around the pod's NetworkPolicy
// state (package netpol) and flattens (package netpol/tiers) into the one dptypes.PodPolicy the datapath
// enforces with its two longest-prefix lookups per packet, however many rules and priorities there are.
//
// It holds the cluster's Pods, Namespaces and Nodes as the agent's informers report them, and the parsed
// policies. A peer of a policy keeps its members (pods by their addresses, nodes by theirs), updated by
// the events that can change them: a pod event asks each peer of the policies about that one pod, a
// namespace event about that namespace's pods, a node event about that node. Only the node's pods that a
// changed policy or peer reaches are compiled again; every event returns the addresses of the node's pods
// whose Rules changed. With no ClusterNetworkPolicy, every event costs a map update and nothing else.
//
// The subject and pod peers are pods with addresses of their own: never host-network pods, nor pods that
// ended. A nodes peer is the addresses of the nodes' status.addresses (InternalIP and ExternalIP). A rule
// that fails closed (cnp.Rule.FailClosed) matches nothing when it is an Accept rule and denies every flow of
// its direction otherwise. A named port resolves on the subject pod for ingress and on each pod peer for
// egress; a peer without it is matched by the rule's numbered ports only.
package cluster
