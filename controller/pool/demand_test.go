package pool

import "testing"

// waiting is c with n pods waiting for an IP.
func waiting(c Counts, n int) Counts { c.Waiting = n; return c }

// TestGrowthIsSizedByThePodsWaiting: the pods waiting for an IP count as holding one, so a burst gets what it
// needs plus the warm target in one step, within max pods and the ENIs' room, and no surplus is released
// while they wait.
func TestGrowthIsSizedByThePodsWaiting(t *testing.T) {
	m5large := Limits{MaxENIs: 3, IPsPerENI: 9}
	pd := func(t Targets) Targets { t.Prefixes = true; return t }
	for _, tc := range []struct {
		name    string
		targets Targets
		limits  Limits
		counts  Counts
		want    Decision
	}{
		{"prefix mode: 100 pods waiting on an empty primary ask for their addresses and a warm prefix, capped by max pods",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), m5large, waiting(prefixENIs([4]int{1, 16, 0, 0}), 100),
			Decision{AddIPs: 94}},
		{"prefix mode: 20 pods waiting with 16 free ask for the 4 short and a warm prefix",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), m5large, waiting(prefixENIs([4]int{2, 16, 0, 0}), 20),
			Decision{AddIPs: 20}},
		{"prefix mode: no pod waiting keeps the warm target alone",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), m5large, prefixENIs([4]int{2, 16, 0, 0}), Decision{}},
		{"prefix mode at max pods: the pods waiting ask for nothing more",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), m5large, waiting(prefixENIs([4]int{7, 110, 0, 0}), 10), Decision{}},
		{"WARM_IP_TARGET=1: 12 pods waiting ask for 13, as far as the primary's room goes",
			Targets{WarmIP: 1}, m5large, waiting(enis([4]int{5, 5, 0, 0}), 12), Decision{AddIPs: 4}},
		{"WARM_IP_TARGET=1 and a full primary: the pods waiting ask for a new ENI sized for them",
			Targets{WarmIP: 1}, m5large, waiting(enis([4]int{9, 9, 0, 0}), 6), Decision{NewENI: true, NewENIIPs: 7}},
		{"WARM_ENI_TARGET=1: pods waiting beyond the warm ENI ask for another ENI",
			Targets{WarmENI: 1}, m5large, waiting(enis([4]int{9, 0, 0, 0}), 9), Decision{NewENI: true, NewENIIPs: 9}},
		{"the free IPs the pods waiting will take are no surplus: the empty prefix stays",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), m5large, waiting(prefixENIs([4]int{3, 10, 0, 1}), 20), Decision{}},
		{"with nobody waiting the same empty prefix is surplus",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), m5large, prefixENIs([4]int{3, 10, 0, 1}), Decision{ReleaseIPs: 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.targets.Decide(tc.limits, tc.counts); got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}
