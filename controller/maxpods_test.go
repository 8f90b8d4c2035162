package controller_test

import (
	"testing"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/metadata"
)

func TestMaxPodsIsTheSettingElseWhatTheENIsHold(t *testing.T) {
	m5large := controller.NodeInfo{MaxENIs: 3, IPv4PerENI: 10}
	for _, c := range []struct {
		name string
		cfg  controller.Config
		want int
	}{
		{"MAX_PODS when set", controller.Config{MaxPods: 17}, 17},
		{"else ENIs x (IPs per ENI - 1) + 2", controller.Config{}, 3*9 + 2},
		{"with MAX_ENI counting only the ENIs the node may hold", controller.Config{MaxENI: 2}, 2*9 + 2},
		{"in prefix mode, 16 addresses a slot, uncapped while the vCPUs are unknown", controller.Config{EnablePrefixDelegation: true}, 3*9*16 + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := controller.MaxPods(c.cfg, m5large); got != c.want {
				t.Errorf("MaxPods = %d, want %d", got, c.want)
			}
		})
	}
}

func TestTheAgentsMaxPodsIsKubeletsForItsInstance(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  controller.Config
		info controller.NodeInfo
		want int
	}{
		{"m5.large with secondary IPs: 29", controller.Config{},
			controller.NodeInfo{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 29},
		{"m5.large in prefix mode: kubelet's ceiling of 110", controller.Config{EnablePrefixDelegation: true},
			controller.NodeInfo{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 110},
		{"m5.4xlarge with secondary IPs: 234 capped at 110", controller.Config{},
			controller.NodeInfo{MaxENIs: 8, IPv4PerENI: 30, VCPUs: 16, Hypervisor: "nitro"}, 110},
		{"c5.18xlarge in prefix mode: 250", controller.Config{EnablePrefixDelegation: true},
			controller.NodeInfo{MaxENIs: 15, IPv4PerENI: 50, VCPUs: 72, Hypervisor: "nitro"}, 250},
		{"m4.large (Xen) asking for prefixes keeps secondary IPs: 20", controller.Config{EnablePrefixDelegation: true},
			controller.NodeInfo{MaxENIs: 2, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "xen"}, 20},
		{"m5.large, custom networking, MAX_ENI=1: the primary only, which holds no pods: 2", controller.Config{CustomNetworking: true, MaxENI: 1},
			controller.NodeInfo{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 2},
		{"MAX_PODS wins", controller.Config{MaxPods: 64, EnablePrefixDelegation: true},
			controller.NodeInfo{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := controller.MaxPods(c.cfg, c.info); got != c.want {
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
		cfg      controller.Config
		l        metadata.Limits
		prefixes bool
		want     controller.PodLimit
	}{
		{"30 vCPUs: the 110 ceiling", controller.Config{}, nitro(30), false, controller.PodLimit{MaxAllowed: 234, Ceiling: 110, MaxPods: 110}},
		{"31 vCPUs: the 250 ceiling", controller.Config{}, nitro(31), false, controller.PodLimit{MaxAllowed: 234, Ceiling: 250, MaxPods: 234}},
		{"prefixes: 16 addresses a slot", controller.Config{MaxENI: 1}, nitro(64), true, controller.PodLimit{MaxAllowed: 29*16 + 2, Ceiling: 250, MaxPods: 250, Prefixes: true}},
		{"Xen: secondary IPs", controller.Config{}, metadata.Limits{MaxENIs: 2, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "xen"}, true, controller.PodLimit{MaxAllowed: 20, Ceiling: 110, MaxPods: 20}},
		{"custom networking: the primary ENI carries no pods", controller.Config{CustomNetworking: true}, nitro(31), false, controller.PodLimit{MaxAllowed: 7*29 + 2, Ceiling: 250, MaxPods: 7*29 + 2}},
		{"custom networking, m5.large: the calculator's 20", controller.Config{CustomNetworking: true}, metadata.Limits{MaxENIs: 3, IPv4PerENI: 10, VCPUs: 2, Hypervisor: "nitro"}, false, controller.PodLimit{MaxAllowed: 20, Ceiling: 110, MaxPods: 20}},
		{"custom networking with prefixes", controller.Config{CustomNetworking: true}, nitro(31), true, controller.PodLimit{MaxAllowed: 7*29*16 + 2, Ceiling: 250, MaxPods: 250, Prefixes: true}},
		{"custom networking: MAX_ENI counts the primary", controller.Config{CustomNetworking: true, MaxENI: 3}, nitro(31), false, controller.PodLimit{MaxAllowed: 2*29 + 2, Ceiling: 250, MaxPods: 2*29 + 2}},
		{"custom networking, MAX_ENI=1: no ENI for pods, host-network pods only", controller.Config{CustomNetworking: true, MaxENI: 1}, nitro(31), false, controller.PodLimit{MaxAllowed: 2, Ceiling: 250, MaxPods: 2}},
		{"custom networking, MAX_ENI=1 with prefixes: host-network pods only", controller.Config{CustomNetworking: true, MaxENI: 1}, nitro(31), true, controller.PodLimit{MaxAllowed: 2, Ceiling: 250, MaxPods: 2, Prefixes: true}},
		{"MAX_PODS is the setting", controller.Config{MaxPods: 50}, nitro(2), true, controller.PodLimit{MaxAllowed: 50, Ceiling: 110, MaxPods: 50, Prefixes: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := controller.KubeletMaxPods(c.cfg, c.l, c.prefixes); got != c.want {
				t.Errorf("KubeletMaxPods = %+v, want %+v", got, c.want)
			}
		})
	}
}
