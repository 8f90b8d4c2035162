// Package sgpool holds the pools of security-group sets for pods: what security groups for pods
// (ENABLE_POD_ENI) adds to the node's IPAM. A pod that SecurityGroupPolicies select takes its IP from an
// ENI whose groups are exactly the union of theirs, its set; the datapath sends its packets out of that
// ENI, so the VPC applies the set's groups to them. Pods no policy selects keep the node's default pool.
//
// Each set's ENIs are created on demand, when an ADD of the set finds no free address on them, through the
// same journaled commit as every ENI (its groups are in the create's record, and the ENI carries the set
// in a tag, so a replay or an adoption knows it), and go back once they have held no pod for a while. The
// node's ENI limit is shared: the default pool's ENIs, the sets' and the ENIs others attached all take a
// slot, so a node holds at most its ENI limit less the primary (less the foreign ENIs) distinct sets. An
// ADD whose set finds no slot fails at once, naming its policies, the set and the limit; other pods are
// not affected.
//
// The package does no I/O and knows nothing of Kubernetes: Line is the ADDs waiting for a set's address,
// Decide the arithmetic of one round, Idle the clock of empty ENIs, Report what each set holds. The node
// controller applies the decisions through the ENI commit.
package sgpool
