package cluster

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// An IPv6 cluster's addresses fit together: Services outside the VPC, the API server's and DNS's Service
// addresses in their range, the subnet's /64 and the fabric's VPC host in the VPC's /56.
func TestAnIPv6ClustersAddressPlanFitsTogether(t *testing.T) {
	f, err := FamilyOf("IPv6")
	if err != nil {
		t.Fatal(err)
	}
	svc, vpc, subnet := netip.MustParsePrefix(f.ServiceCIDR), netip.MustParsePrefix(f.VPCBlock), netip.MustParsePrefix(f.SubnetBlock)
	for _, a := range []string{f.APIServiceIP, f.DNSServiceIP} {
		if ip := netip.MustParseAddr(a); !ip.Is6() || !svc.Contains(ip) {
			t.Errorf("%s is not an IPv6 address of the Service range %s", a, svc)
		}
	}
	if f.AgentEnv["ENIWIRE_SERVICE_CIDRS"] != f.ServiceCIDR {
		t.Errorf("the agent is handed the Service range %q, want %s", f.AgentEnv["ENIWIRE_SERVICE_CIDRS"], f.ServiceCIDR)
	}
	if svc.Overlaps(vpc) {
		t.Errorf("the Service range %s overlaps the VPC's %s", svc, vpc)
	}
	if vpc.Bits() != 56 || subnet.Bits() != 64 || !vpc.Contains(subnet.Addr()) {
		t.Errorf("subnet %s should be a /64 of the VPC's /56 %s", subnet, vpc)
	}
	if host := netip.MustParseAddr("2600:1f14:e0:ff::10"); !vpc.Contains(host) {
		t.Errorf("the fabric's VPC host %s is outside the VPC's %s", host, vpc)
	}
	if _, err := FamilyOf("ipv5"); err == nil {
		t.Error("FamilyOf(ipv5) gave no error")
	}
	if v4, err := FamilyOf(""); err != nil || v4.IsIPv6() || v4.ServiceCIDR != ServiceCIDR {
		t.Errorf("FamilyOf(\"\") = %+v, %v; want IPv4 with %s", v4, err, ServiceCIDR)
	}
}

// CoreDNS's Service takes the family's DNS address, the one kubelets hand to pods.
func TestCoreDNSTakesTheFamilysDNSAddress(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "test", "k8s", "manifests", "coredns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{IPv4, IPv6, Dual} {
		f, _ := FamilyOf(name)
		out, err := coreDNSManifest(b, f)
		if err != nil {
			t.Fatal(err)
		}
		var svc *corev1.Service
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var s corev1.Service
			if err := yaml.Unmarshal([]byte(doc), &s); err == nil && s.Kind == "Service" {
				svc = &s
			}
		}
		if svc == nil || svc.Spec.ClusterIP != f.DNSServiceIP {
			t.Errorf("%s: CoreDNS's Service = %+v, want clusterIP %s", name, svc, f.DNSServiceIP)
		}
	}
}

// The test overlay turns the agent's IPv6 mode (and the prefix delegation it needs) on in an IPv6 cluster,
// its dual-stack mode in a dual-stack one, and adds nothing in an IPv4 one.
func TestTheOverlaySetsTheFamilysAgentSettings(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		family string
		want   map[string]string
	}{
		{IPv4, map[string]string{"ENABLE_IPv6": "", "ENABLE_PREFIX_DELEGATION": "", "ENIWIRE_SERVICE_CIDRS": ""}},
		{IPv6, map[string]string{"ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true", "ENIWIRE_SERVICE_CIDRS": "fd00:10:96::/112"}},
		{Dual, map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "true", "ENABLE_PREFIX_DELEGATION": "", "ENIWIRE_SERVICE_CIDRS": "fd00:10:96::/112"}},
	} {
		f, _ := FamilyOf(tc.family)
		c := &Cluster{Name: "ektest", RepoRoot: root, Sim: ec2sim.New(ec2sim.DefaultConfig()), Family: f}
		dir := t.TempDir()
		if err := c.WriteOverlay(dir, "t1"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Patches []struct{ Patch string } `json:"patches"`
		}
		if err := yaml.Unmarshal(b, &k); err != nil || len(k.Patches) != 1 {
			t.Fatalf("%s: kustomization: %v: %s", tc.family, err, b)
		}
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal([]byte(k.Patches[0].Patch), &ds); err != nil || len(ds.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: the patch: %v: %s", tc.family, err, k.Patches[0].Patch)
		}
		env := map[string]string{}
		for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		for name, want := range tc.want {
			if env[name] != want {
				t.Errorf("%s cluster: the overlay sets %s=%q, want %q", tc.family, name, env[name], want)
			}
		}
		if env["CLUSTER_NAME"] != "ektest" {
			t.Errorf("%s cluster: the overlay lost CLUSTER_NAME: %v", tc.family, env)
		}
	}
}

// A dual-stack cluster's addresses: both Service ranges, IPv4 first (the API server's and DNS's Service
// addresses in it, the default family), the IPv6 one handed to the agent; the IPv6 cluster's VPC blocks.
func TestADualStackClustersAddressPlanHasBothFamilies(t *testing.T) {
	f, err := FamilyOf("dual")
	if err != nil {
		t.Fatal(err)
	}
	v6, _ := FamilyOf(IPv6)
	if f.ServiceCIDR != ServiceCIDR+","+v6.ServiceCIDR || f.APIServiceIP != APIServiceIP || f.DNSServiceIP != DNSServiceIP {
		t.Errorf("dual-stack Services: range %s, API %s, DNS %s; want %s,%s, %s and %s", f.ServiceCIDR, f.APIServiceIP, f.DNSServiceIP,
			ServiceCIDR, v6.ServiceCIDR, APIServiceIP, DNSServiceIP)
	}
	if f.VPCBlock != v6.VPCBlock || f.SubnetBlock != v6.SubnetBlock || !f.HasIPv6() || f.IsIPv6() || !f.IsDual() {
		t.Errorf("dual-stack family %+v: want the IPv6 cluster's blocks, IPv6 but not IPv6 single-stack", f)
	}
	if f.AgentEnv["ENIWIRE_SERVICE_CIDRS"] != v6.ServiceCIDR {
		t.Errorf("the agent is handed %q, want the IPv6 Service range %s", f.AgentEnv["ENIWIRE_SERVICE_CIDRS"], v6.ServiceCIDR)
	}
}

// A dual-stack node's kubelet names both addresses, IPv4 first, and kube-proxy's cluster CIDR both VPC
// blocks; an IPv6 node's names its IPv6 alone, an IPv4 node's its IPv4.
func TestANodesAddressesFollowTheFamily(t *testing.T) {
	inst := ec2sim.Instance{PrimaryIP: "10.0.0.4", VPCCIDR: VPCCIDR}
	v6 := netip.MustParseAddr("2600:1f14:e0:1::4")
	for _, c := range []struct {
		family, nodeIPs, podRange string
	}{
		{IPv4, "10.0.0.4", VPCCIDR},
		{IPv6, "2600:1f14:e0:1::4", "2600:1f14:e0::/56"},
		{Dual, "10.0.0.4,2600:1f14:e0:1::4", VPCCIDR + ",2600:1f14:e0::/56"},
	} {
		f, _ := FamilyOf(c.family)
		n := &Node{Instance: inst, family: f}
		if f.HasIPv6() {
			n.IPv6 = v6
		}
		if got := n.nodeIPs(); got != c.nodeIPs {
			t.Errorf("%s node: --node-ip %s, want %s", c.family, got, c.nodeIPs)
		}
		if got := n.podRange(); got != c.podRange {
			t.Errorf("%s node: clusterCIDR %s, want %s", c.family, got, c.podRange)
		}
	}
}
