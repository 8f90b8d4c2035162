// Package tiers decides flows the way ClusterNetworkPolicy (policy.networking.k8s.io) layers its tiers
// around NetworkPolicy, for one pod and one direction, and flattens those verdicts into the form the
// datapath enforces: per peer prefix (longest prefix wins), a verdict for every protocol and port. It is
// pure Go and knows no Kubernetes types: the caller resolves each rule's peers into prefixes and its ports
// into dptypes.PortRanges, and hands over the NetworkPolicy tier as package netpol compiled it.
//
// # The evaluation
//
// A flow is a peer address (the source for ingress, the destination for egress), a protocol and a port
// (the pod's for ingress, the peer's for egress). A rule matches it when one of the rule's peer prefixes
// contains the address and the rule's ports contain the protocol and port; a rule without ports matches
// every protocol and port, ICMP included. Then:
//
//   - The Admin tier: its policies by priority, lower first; within a policy, its rules in the order
//     written. The first rule that matches decides: Accept allows, Deny denies, Pass skips the rest of the
//     tier and goes on to the NetworkPolicy tier.
//   - The NetworkPolicy tier: when NetworkPolicy isolates the pod in this direction, the flow is allowed
//     iff the entry of the longest NetworkPolicy prefix that contains the address holds its protocol and
//     port, and that is final (no entry: denied). Otherwise the tier says nothing, and its entries are not
//     read.
//   - The Baseline tier, as the Admin tier, except that Pass goes on to the default.
//   - The default: allowed.
//
// Judge is that evaluation written out plainly for one flow, and says which tier and which rule decided:
// it is the reference Flatten is tested against, and what an explanation of a verdict reads.
//
// # Equal priorities
//
// The API leaves it to the implementation which of two policies of one tier and one priority decides a
// flow both have a matching rule for. Here each policy of that priority answers with its own first
// matching rule, and the most restrictive answer wins: Deny over Pass over Accept. For any one flow,
// Deny never allows it, Accept always does, and Pass may lead either way, so this is the ordering by what
// each answer can let through, and the winner is the answer no other policy of that priority can make
// less safe. It also depends on nothing but the policies' content: renaming a policy, or the order the
// caller lists them in, never changes a verdict, which an order by name would. When several policies give
// the winning answer, Judge names the rule of the first of them by name.
//
// A policy is its name and priority together; rules of one policy keep their Index order, and rules with
// equal Index the order given. An Action other than Accept, Deny and Pass is read as Deny: the API asks
// an implementation to fail closed on what it cannot honour. A rule without peers matches nothing; a port
// range of a protocol without ports (anything but TCP, UDP and SCTP) matches nothing either, so a caller
// that wants such a Deny or Pass rule to fail closed hands over a rule without ports instead.
//
// # The flattened form
//
// The datapath looks a peer up in a longest-prefix trie, then the flow's (protocol, port) in the port
// table of the entry it found: two lookups per packet however many rules there are. Flatten produces
// those entries: a unique prefix each; a default verdict for every protocol and port, and the TCP, UDP
// and SCTP port ranges whose verdict is the opposite one. Any other protocol has no ports, so only the
// default speaks for it.
//
// Flatten works from one fact: the prefixes that contain an address are nested, so if L is the longest of
// the rules' and NetworkPolicy's prefixes that contains the address, the rules that match the address are
// exactly those with a peer prefix containing L, and its NetworkPolicy entry is the longest one containing
// L. Every address whose longest prefix is L therefore has L's verdicts, and Flatten computes them once
// per distinct prefix. Over ports, it cuts each protocol's 0..65535 at every boundary of the ranges in
// play there, decides each cell once, and merges neighbouring cells of equal verdict. The whole address
// space of each family, 0.0.0.0/0 and ::/0, is always an entry, so every address finds one; an entry
// whose verdicts are its enclosing entry's is left out, since the lookup falls back to that one. When no
// flow at all is denied, the Result is empty and Needed says false: the datapath need not judge the
// direction (nothing selects the pod, or nothing that selects it denies anything).
//
// # Bounds
//
// Let P be the distinct prefixes (the Admin rules' peers, the Baseline rules' when NetworkPolicy does not
// isolate the pod, its entries' when it does, and the two roots), R the rules, and, for one prefix and one
// protocol, s the port ranges of that protocol among the rules containing the prefix and its NetworkPolicy
// entry. That protocol has at most 2s+1 cells there, and the entry at most s+1 ranges of it, so the
// output is at most P entries of at most S+3 ranges each, S being s summed over TCP, UDP and SCTP.
// Flatten spends O(R log R + S log S) per prefix: each tier paints the cells through a union-find of
// "the next cell not decided yet", so a cell is decided once, not once per rule, and policies of equal
// priority cost a sort of their rules' pieces, never a product of policies and cells. Nothing is
// exponential: no set of rules is enumerated, only prefixes and cells.
package tiers
