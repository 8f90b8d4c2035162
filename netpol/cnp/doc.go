// Package cnp reads ClusterNetworkPolicies (kubernetes-sigs/network-policy-api, group
// policy.networking.k8s.io, served as v1beta1, the storage version, and v1alpha2, one schema) into eniwire's
// own types, checked whole, for netpol to compile beside NetworkPolicy. It is pure Go: the agent hands Parse
// the *unstructured.Unstructured its dynamic informer holds (as controller/podsg reads SecurityGroupPolicy),
// and the API's Go module is not imported, so the project's k8s.io modules stay at their own version.
//
// # What the API asks that this package carries
//
//   - Tiers: Admin before NetworkPolicy, Baseline after; within a tier, priority (0..1000), lower first,
//     and within a policy, the order of its rules.
//   - The subject, and every pod peer, is pods by namespace labels and pod labels (PodSelection); a
//     namespaces form is every pod of its namespaces. Host-network pods are never among them.
//   - Egress peers may also be nodes (by node labels: their status addresses; the API's experimental
//     ClusterNetworkPolicyEgressNodePeers) and networks (IPv4 and IPv6 prefixes).
//   - A rule without protocols matches every protocol and port, ICMP included. A protocols entry is TCP,
//     UDP or SCTP with a port or a range, or a port by name (experimental ClusterNetworkPolicyNamedPorts),
//     resolved per destination pod by the compiler.
//
// # Refused, or applied with a warning
//
// Parse refuses a policy whole, with an *InvalidError listing every problem at its field path, when it is
// what the API server would not admit or eniwire cannot tell what it means: the wrong apiVersion or kind;
// a field of the wrong JSON type; tier not Admin or Baseline; priority missing or outside 0..1000; a subject
// that is not exactly one of namespaces and pods; a pods form without podSelector; more than 25 ingress or
// egress rules; a rule without a known action, a name over 100 bytes, from/to missing, empty or over 25
// peers; a peer setting more than one field; networks empty, over 25, not a CIDR, with bits set past the
// prefix length, IPv4-mapped, or repeated; a label selector that does not parse (an unknown operator,
// values where none belong, an invalid key or value); protocols empty or over 25; an entry that is not
// exactly one of tcp, udp, sctp and destinationNamedPort; a protocol without destinationPort, or whose
// destinationPort is not exactly one of number and range; a port outside 1..65535; a range whose start is
// not below its end; an empty port name; a port by name in an egress rule with a nodes, networks or
// domainNames peer. A part of a policy is never applied: a Deny rule dropped from above an Accept rule
// would let through what the policy denies. The agent logs a refusal and applies nothing of the policy, as
// it applies nothing of a SecurityGroupPolicy it refuses. The API server refuses all of these where the
// CRD is installed, so a refusal means a CRD other than the API's, or an object that bypassed it.
//
// A peer that sets no field eniwire knows is what the API foresees of a CRD newer than the implementation,
// and it asks the implementation to fail closed: an Accept rule then matches no traffic, a Deny or Pass
// rule denies all traffic of its direction (Rule.FailClosed, MatchesNothing, DeniesAll). So does a
// domainNames peer, which eniwire does not implement: refusing the policy instead would drop its Deny
// rules too, failing open. These are not errors: the policy applies, with a Warning naming the peer. A
// port name that no container port can have is applied as written (it matches no port) and warned of.
//
// Fields eniwire does not know elsewhere than in the API's unions (peers, subject, protocols, ports) are
// ignored, as the API server prunes them where the CRD is installed.
package cnp
