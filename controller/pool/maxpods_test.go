package pool_test

import (
	"testing"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

func TestMaxPodsIsTheSettingElseWhatTheENIsHold(t *testing.T) {
	m5large := metadata.Limits{MaxENIs: 3, IPv4PerENI: 10}
	for _, c := range []struct {
		name string
		cfg  pool.PodSettings
		want int
	}{
		{"MAX_PODS when set", pool.PodSettings{MaxPods: 17}, 17},
		{"else ENIs x (IPs per ENI - 1) + 2", pool.PodSettings{}, 3*9 + 2},
		{"with MAX_ENI counting only the ENIs the node may hold", pool.PodSettings{MaxENI: 2}, 2*9 + 2},
		{"in prefix mode, 16 addresses a slot, uncapped while the vCPUs are unknown", pool.PodSettings{Prefixes: true}, 3*9*16 + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pool.MaxPods(c.cfg, m5large); got != c.want {
				t.Errorf("MaxPods = %d, want %d", got, c.want)
			}
		})
	}
}

func TestTheAgentsMaxPodsIsKubeletsForItsInstance(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  pool.PodSettings
		l    metadata.Limits
		want int
	}{
		{"m5.large with secondary IPs: 29", pool.PodSettings{},
			metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 29},
		{"m5.large in prefix mode: kubelet's ceiling of 110", pool.PodSettings{Prefixes: true},
			metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 110},
		{"m5.4xlarge with secondary IPs: 234 capped at 110", pool.PodSettings{},
			metadata.Limits{MaxENIs: 8, IPv4PerENI: 30, VCPUs: 16, Hypervisor: "nitro"}, 110},
		{"c5.18xlarge in prefix mode: 250", pool.PodSettings{Prefixes: true},
			metadata.Limits{MaxENIs: 15, IPv4PerENI: 50, VCPUs: 72, Hypervisor: "nitro"}, 250},
		{"m4.large (Xen) asking for prefixes keeps secondary IPs: 20", pool.PodSettings{Prefixes: true},
			metadata.Limits{MaxENIs: 2, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "xen"}, 20},
		{"m5.large, custom networking, MAX_ENI=1: the primary only, which holds no pods: 2", pool.PodSettings{CustomNetworking: true, MaxENI: 1},
			metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 2},
		{"m5.large in IPv6 mode: prefix delegation's number, kubelet's ceiling of 110", pool.PodSettings{IPv6: true},
			metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 110},
		{"t3.micro in IPv6 mode: 2 x 1 x 16 + 2 = 34, though the /80 holds more", pool.PodSettings{IPv6: true},
			metadata.Limits{MaxENIs: 2, IPv4PerENI: 2, VCPUs: 2, Hypervisor: "nitro"}, 34},
		{"MAX_PODS wins", pool.PodSettings{MaxPods: 64, Prefixes: true},
			metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pool.MaxPods(c.cfg, c.l); got != c.want {
				t.Errorf("MaxPods = %d, want %d", got, c.want)
			}
		})
	}
}

func TestKubeletMaxPodsCeilingAndPrefixes(t *testing.T) {
	nitro := func(vcpus int) metadata.Limits {
		return metadata.Limits{MaxENIs: 8, IPv4PerENI: 30, VCPUs: vcpus, Hypervisor: "nitro"}
	}
	for _, c := range []struct {
		name     string
		cfg      pool.PodSettings
		l        metadata.Limits
		prefixes bool
		want     pool.PodLimit
	}{
		{"30 vCPUs: the 110 ceiling", pool.PodSettings{}, nitro(30), false, pool.PodLimit{MaxAllowed: 234, Ceiling: 110, MaxPods: 110}},
		{"31 vCPUs: the 250 ceiling", pool.PodSettings{}, nitro(31), false, pool.PodLimit{MaxAllowed: 234, Ceiling: 250, MaxPods: 234}},
		{"prefixes: 16 addresses a slot", pool.PodSettings{MaxENI: 1}, nitro(64), true, pool.PodLimit{MaxAllowed: 29*16 + 2, Ceiling: 250, MaxPods: 250, Prefixes: true}},
		{"Xen: secondary IPs", pool.PodSettings{}, metadata.Limits{MaxENIs: 2, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "xen"}, true, pool.PodLimit{MaxAllowed: 20, Ceiling: 110, MaxPods: 20}},
		{"custom networking: the primary ENI carries no pods", pool.PodSettings{CustomNetworking: true}, nitro(31), false, pool.PodLimit{MaxAllowed: 7*29 + 2, Ceiling: 250, MaxPods: 7*29 + 2}},
		{"custom networking, m5.large: the calculator's 20", pool.PodSettings{CustomNetworking: true}, metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, false, pool.PodLimit{MaxAllowed: 20, Ceiling: 110, MaxPods: 20}},
		{"custom networking with prefixes", pool.PodSettings{CustomNetworking: true}, nitro(31), true, pool.PodLimit{MaxAllowed: 7*29*16 + 2, Ceiling: 250, MaxPods: 250, Prefixes: true}},
		{"custom networking: MAX_ENI counts the primary", pool.PodSettings{CustomNetworking: true, MaxENI: 3}, nitro(31), false, pool.PodLimit{MaxAllowed: 2*29 + 2, Ceiling: 250, MaxPods: 2*29 + 2}},
		{"custom networking, MAX_ENI=1: no ENI for pods, host-network pods only", pool.PodSettings{CustomNetworking: true, MaxENI: 1}, nitro(31), false, pool.PodLimit{MaxAllowed: 2, Ceiling: 250, MaxPods: 2}},
		{"custom networking, MAX_ENI=1 with prefixes: host-network pods only", pool.PodSettings{CustomNetworking: true, MaxENI: 1}, nitro(31), true, pool.PodLimit{MaxAllowed: 2, Ceiling: 250, MaxPods: 2, Prefixes: true}},
		{"MAX_PODS is the setting", pool.PodSettings{MaxPods: 50}, nitro(2), true, pool.PodLimit{MaxAllowed: 50, Ceiling: 110, MaxPods: 50, Prefixes: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.cfg
			s.Prefixes = c.prefixes
			if got := pool.KubeletMaxPods(s, c.l); got != c.want {
				t.Errorf("KubeletMaxPods = %+v, want %+v", got, c.want)
			}
		})
	}
}
