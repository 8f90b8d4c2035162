package cluster

import (
	"fmt"
	"strings"
)

// The cluster's IP families: IPv4 (the default) or IPv6 single-stack, as an EKS cluster is created with one
// or the other (ipFamily), or dual-stack, beyond EKS. In an IPv6 cluster the VPC and its subnet carry IPv6
// blocks as well, each node's primary ENI holds one IPv6 address (its kubelet's node IP, as EC2 gives one at
// launch in such a subnet), Services take IPv6 addresses, and the agent runs with ENABLE_IPv6: pods get
// addresses of their node's /80. A dual-stack cluster has the same IPv6 blocks and node addresses, IPv4
// first: kubelets have node IPs of both families, Services ranges of both (IPv4 the default), and the agent
// runs with ENABLE_IPv4 and ENABLE_IPv6: each pod a VPC IPv4 and an IPv6 of its node's /80.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
	Dual = "dual"
)

// Family is the address plan of a cluster of one IP family.
type Family struct {
	Name string
	// ServiceCIDR is the Services' range (outside the simulated VPC; a dual-stack cluster's two, IPv4 first);
	// APIServiceIP, its first address, is the `kubernetes` Service's and DNSServiceIP, its tenth, cluster
	// DNS's, as kubeadm lays them out.
	ServiceCIDR, APIServiceIP, DNSServiceIP string
	// VPCBlock and SubnetBlock are the IPv6 /56 of the VPC and the /64 of the cluster's subnet out of it, in
	// an IPv6 or dual-stack cluster only (the VPC host's default 2600:1f14:e0:ff::10 lies in the same /56).
	VPCBlock, SubnetBlock string
	// AgentEnv are the agent's settings the family needs, added to the DaemonSet by the test overlay.
	AgentEnv map[string]string
}

var families = map[string]Family{
	IPv4: {Name: IPv4, ServiceCIDR: ServiceCIDR, APIServiceIP: APIServiceIP, DNSServiceIP: DNSServiceIP},
	IPv6: {Name: IPv6, ServiceCIDR: "fd00:10:96::/112", APIServiceIP: "fd00:10:96::1", DNSServiceIP: "fd00:10:96::a",
		VPCBlock: "2600:1f14:e0::/56", SubnetBlock: "2600:1f14:e0:1::/64",
		// IPv6 mode takes one /80 on the primary ENI, which is prefix delegation (the AWS VPC CNI requires both).
		// A pod's IPv6 packet to no VPC block leaves by its ENI untranslated, so the Service range must be
		// named for the host stack (kube-proxy) to see it, as with external SNAT.
		AgentEnv: map[string]string{"ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true", "ENIWIRE_SERVICE_CIDRS": "fd00:10:96::/112"}},
	Dual: {Name: Dual, ServiceCIDR: ServiceCIDR + ",fd00:10:96::/112", APIServiceIP: APIServiceIP, DNSServiceIP: DNSServiceIP,
		VPCBlock: "2600:1f14:e0::/56", SubnetBlock: "2600:1f14:e0:1::/64",
		// IPv4 as in an IPv4 cluster (secondary IPs); the IPv6 Service range named as in an IPv6 cluster.
		AgentEnv: map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "true", "ENIWIRE_SERVICE_CIDRS": "fd00:10:96::/112"}},
}

// FamilyOf is the address plan of the family named ("" is IPv4).
func FamilyOf(name string) (Family, error) {
	if name == "" {
		name = IPv4
	}
	f, ok := families[strings.ToLower(name)]
	if !ok {
		return Family{}, fmt.Errorf("IP family %q: want %s, %s or %s", name, IPv4, IPv6, Dual)
	}
	return f, nil
}

// IsIPv6 says whether the cluster is IPv6 single-stack.
func (f Family) IsIPv6() bool { return f.Name == IPv6 }

// IsDual says whether the cluster is dual-stack.
func (f Family) IsDual() bool { return f.Name == Dual }

// HasIPv6 says whether the VPC, the nodes and the pods have IPv6 addresses: an IPv6 or dual-stack cluster.
func (f Family) HasIPv6() bool { return f.IsIPv6() || f.IsDual() }
