// Package netpol compiles Kubernetes NetworkPolicies (networking.k8s.io/v1) into the state the datapath
// enforces for each pod of this node: a dptypes.PodPolicy keyed by the pod's address. It is pure Go: no I/O,
// no BPF, no client; the agent feeds it the Pods, Namespaces and NetworkPolicies its informers report, and
// hands what it compiles to a dptypes.PolicyDriver.
//
// # The compile model
//
// The pods of this node that are compiled are those with spec.nodeName equal to the node's name, with an
// address of their own (status.podIPs, IPv4 and IPv6 alike) and not on the host's network; a finished pod
// (Succeeded, Failed) holds no address. For such a pod:
//
//   - The policies that select it are those of its namespace whose podSelector matches its labels. None:
//     the zero PodPolicy, not isolated. Otherwise it is isolated in each direction that one of them names
//     in policyTypes (absent policyTypes: Ingress, and Egress too when the policy has egress rules), and
//     the policies add up: a flow is allowed when any rule of any of them allows it.
//   - Each rule grants its ports to its peers. A pod peer (podSelector, namespaceSelector, or both) is every
//     pod of the cluster it matches, at each of the pod's addresses as a host prefix (/32, /128); host-network
//     and finished pods are no peers. An ipBlock is its prefix, its except holes in it. An empty from/to is
//     every address of both families (0.0.0.0/0, ::/0).
//   - Ports are a protocol (TCP when unset, UDP, SCTP) and a port, a range (endPort) or every port; a rule
//     without ports allows every protocol (dptypes.AnyProtocol, ICMP included). A port by name resolves on
//     the destination pod: for ingress, the selected pod itself; for egress, each peer pod, so each peer's
//     host prefix gets its own port, and a peer without a port of that name (or an address that is no pod's)
//     gets nothing from that entry.
//   - The grants of each direction fold into the contract's longest-prefix form (fold): one entry per
//     distinct prefix, the union of every grant covering it, an except being a longer prefix without its
//     rule's ports. Entries that add nothing to the prefix enclosing them are left out; the result is
//     sorted, so equal inputs compile to equal outputs.
//
// Input the API server would refuse compiles fail-closed: a policy whose podSelector does not parse
// selects every pod of its namespace, a peer selector that does not parse matches nothing, a port with an
// unknown protocol or out of range allows nothing. A namespace whose Namespace object is not
// (yet) known has only the kubernetes.io/metadata.name label that the API server gives every namespace.
//
// # Why per-pod state is keyed by the pod's address
//
// The datapath meets pods as addresses: a packet carries the pod's address, and a lookup by that address,
// one hash probe, finds the pod's state whatever the number of pods, policies and peers. A name would need
// a second table from addresses to names, and names mislead: the AWS agent keyed state by a name prefix and
// merged pods whose names differ only after the last dash. An address belongs to one running pod at a time;
// while a stale pod and its successor both claim one, the newer pod's state is the address's. A dual-stack
// pod has the same state at both of its addresses.
//
// # Compile and the Compiler
//
// Compile compiles a node from scratch, looking at every pod for every question: the reference the
// Compiler is tested against (randomised event sequences), and a baseline of the benchmarks. The Compiler
// is what the agent uses: it keeps indexes, and each upsert or delete of a Pod, Namespace or NetworkPolicy
// recompiles only the pods of this node that the change reaches, and returns the addresses whose state
// changed. Its indexes: a namespace's policies (for the pods they select and their same-namespace peers);
// the namespace-selector peers that pick each namespace; each active peer's members, with their addresses
// kept in order; pods by port name; the node's pods by address. Only policies that select a pod of this node
// are active: on any one node most of a cluster's policies cost their parse alone. A pod event looks at the
// peers of its namespace, a namespace event at the namespace-selector peers, a policy event at its own
// namespace's pods and, for its namespace selectors, at the namespaces they pick. Hold and Flush batch the
// informers' initial lists so that each pod is compiled once.
package netpol
