// Package podsg decides, at a pod's CNI ADD, which security groups the pod's SecurityGroupPolicies give it
// (security groups for pods, ENABLE_POD_ENI); the controller then takes the pod's address from an ENI that
// carries exactly that set (controller/sgpool).
//
// The API is the one AWS users have: the SecurityGroupPolicy of the AWS VPC resource controller
// (group vpcresources.k8s.aws, version v1beta1, namespaced), whose CRD EKS installs; deploy/ carries the same
// CRD, so one serves both. Its rules, as that controller applies them (aws/amazon-vpc-resource-controller-k8s,
// pkg/utils/helper.go, filterPodSecurityGroups, and its CRD in config/crd/bases):
//
//   - A policy selects pods of its own namespace only.
//   - spec.podSelector matches the pod's labels; spec.serviceAccountSelector matches the labels of the pod's
//     ServiceAccount (spec.serviceAccountName, in the pod's namespace). Each selector the policy gives must
//     match: with both, a pod needs both; a selector not given is not consulted. An empty selector ({})
//     matches every pod, or every service account.
//   - A policy that gives neither selector, or no spec.securityGroups.groupIds, selects nothing.
//   - A pod selected by several policies gets the union of their groups, without duplicates; here sorted,
//     as the set is the key of its ENI.
//
// What this package adds, as the agent decides at ADD and not at admission:
//
//   - A policy is checked whole, and one that is malformed is ignored (it selects nothing), never applied
//     in part: a group id not of the form sg- and 8 or 17 hex digits, no groups, no selector, a selector
//     that does not parse. It is logged by every agent, in Status, and written as a Warning Event
//     (InvalidSecurityGroupPolicy) on the policy by the agents of nodes that run pods of its namespace
//     alone: one per node of a large cluster would be a flood.
//   - The union must fit on one ENI (Config.MaxGroupsPerENI, EC2's default quota of 5). A larger one fails
//     the ADD with ErrTooManyGroups naming the policies, the set and the limit, and a Warning Event
//     (TooManySecurityGroups) on each of the policies: starting the pod with a part of its groups, or none,
//     would give it access other than the one asked.
//   - An ENI's groups are its pods' for their life. A policy, a pod's labels or a service account's labels
//     changed after a pod started, so that a new pod would get another set (or be refused), leaves the
//     running pod as it is and writes a Warning Event (SecurityGroupsChanged) on it, once per change: its
//     groups stay X until it is recreated, and would be Y. The Started calls (at ADD, and for the pods of the
//     books after a restart) say what each pod has; a restarted agent reports a standing difference once
//     more.
//
// When the CRD is not installed, the API server answers the list of SecurityGroupPolicies NotFound; then no
// SecurityGroupPolicy can exist (deleting a CRD deletes its objects), so no policy selects any pod, and
// SecurityGroupsOf answers "no groups" at once: the pods start on the ENIs of the node's default groups, as
// the AWS controller lets pods be created when the CRD is gone. Failing every ADD instead would take the
// network away from every new pod of a cluster that turned the setting on before installing the CRD. The
// agent logs it, Status says it, and the watch keeps listing, so a CRD installed later applies (within the
// list's back-off, under a minute). Any other failure of the first lists (RBAC forbidding them, an API
// server out of reach) may hide policies that exist: the ADD waits for them, up to Config.PodWait, and then
// fails with the error; kubelet retries it. Once listed, the watch answers from what it saw last while the
// API server is out of reach.
//
// The watch holds this node's Pods (a field selector on spec.nodeName), every SecurityGroupPolicy, and the
// ServiceAccounts of every namespace, kept to their names and labels (slim.go). Watching the ServiceAccounts
// of the namespaces with policies alone would need an informer started and stopped per namespace; a
// ServiceAccount is small and seldom changes, and holding them all lets an ADD answer without a call to the
// API server, also while it is out of reach, and lets a relabelled ServiceAccount be reported on its
// running pods like an edited policy.
//
// An ADD waits, up to Config.PodWait, for the first lists; then, if its namespace has a valid policy, for
// its pod with the ADD's UID (a pod recreated under the same name may have other labels), and, if a policy
// there selects by service account, for the pod's ServiceAccount. A namespace without a valid policy is
// answered at once.
package podsg
