package pool

import "testing"

func enis(specs ...[4]int) Counts {
	var c Counts
	for i, s := range specs {
		c.ENIs = append(c.ENIs, ENICount{ID: string(rune('a' + i)), Primary: i == 0, Slots: s[0], IPs: s[0], Assigned: s[1],
			Cooldown: s[2], FreeSingles: s[0] - s[1] - s[2]})
	}
	return c
}

// prefixENIs builds counts of ENIs holding only /28 prefixes: {prefixes, assigned, cooldown, empty prefixes}.
func prefixENIs(specs ...[4]int) Counts {
	var c Counts
	for i, s := range specs {
		c.ENIs = append(c.ENIs, ENICount{ID: string(rune('a' + i)), Primary: i == 0, Slots: s[0], IPs: s[0] * 16,
			Assigned: s[1], Cooldown: s[2], EmptyPrefixes: s[3]})
	}
	return c
}

func TestPrefixModeArithmetic(t *testing.T) {
	m5large := Limits{MaxENIs: 3, IPsPerENI: 9}
	pd := func(t Targets) Targets { t.Prefixes = true; return t }
	for _, tc := range []struct {
		name    string
		targets Targets
		counts  Counts
		want    Decision
	}{
		{"WARM_PREFIX_TARGET=1 on an empty primary asks for one prefix's worth",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{0, 0, 0, 0}), Decision{AddIPs: 16}},
		{"WARM_PREFIX_TARGET=1 is met by 16 free addresses across prefixes",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{2, 16, 0, 0}), Decision{}},
		{"a pod more leaves the pool one address short: a whole prefix comes",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{2, 17, 0, 0}), Decision{AddIPs: 1}},
		{"WARM_IP_TARGET=5 in prefix mode asks for the addresses; the grain rounds them up to a prefix",
			pd(Targets{WarmIP: 5}), prefixENIs([4]int{1, 14, 0, 0}), Decision{AddIPs: 3}},
		{"MINIMUM_IP_TARGET=40 asks for 40 addresses: three prefixes' worth",
			pd(Targets{MinimumIP: 40}), prefixENIs([4]int{0, 0, 0, 0}), Decision{AddIPs: 40}},
		{"a full primary in prefix mode asks for a new ENI with one prefix",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{9, 144, 0, 0}), Decision{NewENI: true, NewENIIPs: 16}},
		{"WARM_ENI_TARGET in prefix mode fills a new ENI with prefixes",
			pd(Targets{WarmENI: 1, MaxPods: 250}), prefixENIs([4]int{9, 144, 0, 0}), Decision{NewENI: true, NewENIIPs: 106}},
		{"an empty prefix beyond WARM_PREFIX_TARGET is released",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{3, 10, 0, 1}), Decision{ReleaseIPs: 16}},
		{"a surplus smaller than a prefix releases nothing",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{2, 10, 0, 0}), Decision{}},
		{"a prefix with an address in cooldown is not empty and stays",
			pd(Targets{WarmPrefix: 1}), prefixENIs([4]int{3, 10, 1, 0}), Decision{}},
		{"in fallback the deficit is met with single IPs on the ENIs' free slots",
			Targets{WarmPrefix: 1, Prefixes: true, Fallback: true}, prefixENIs([4]int{8, 128, 0, 0}), Decision{AddIPs: 1}},
		{"in fallback a full ENI asks for a new ENI with single IPs",
			Targets{WarmPrefix: 1, Prefixes: true, Fallback: true}, prefixENIs([4]int{9, 144, 0, 0}), Decision{NewENI: true, NewENIIPs: 9}},
		{"an empty second ENI holding the warm prefix goes when the primary has slots to take its place",
			pd(Targets{WarmIP: 2}), prefixENIs([4]int{0, 0, 0, 0}, [4]int{1, 0, 0, 1}), Decision{ReleaseENI: "b"}},
		{"an empty second ENI holding the warm prefix stays when the primary is full",
			pd(Targets{WarmIP: 2}), prefixENIs([4]int{9, 144, 0, 0}, [4]int{1, 0, 0, 1}), Decision{}},
		{"out of prefix mode an empty prefix goes back, whatever the targets",
			Targets{WarmENI: 1}, prefixENIs([4]int{2, 3, 0, 1}), Decision{ReleaseIPs: 16, PrefixesOnly: true}},
		{"every slot a single IP after the fallback, 9 free: prefixes asked for again, the free ones go back for /28s",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), enis([4]int{9, 9, 0, 0}, [4]int{9, 9, 0, 0}, [4]int{9, 0, 0, 0}), Decision{ReleaseIPs: 9, Repack: true}},
		{"every slot a single IP, 16 free: not short, yet they go back, so that the node can grow past 27",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), enis([4]int{9, 9, 0, 0}, [4]int{9, 2, 0, 0}, [4]int{9, 0, 0, 0}), Decision{ReleaseIPs: 16, Repack: true}},
		{"a free slot left: growth takes it, no repack",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), enis([4]int{9, 9, 0, 0}, [4]int{9, 9, 0, 0}, [4]int{8, 0, 0, 0}), Decision{AddIPs: 8}},
		{"every slot a pod's single IP: nothing to give back, at the limit",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), enis([4]int{9, 9, 0, 0}, [4]int{9, 9, 0, 0}, [4]int{9, 9, 0, 0}), Decision{AtLimit: true}},
		{"every slot a single IP while the fallback holds: no repack, at the limit",
			Targets{WarmPrefix: 1, Prefixes: true, Fallback: true, MaxPods: 110}, enis([4]int{9, 9, 0, 0}, [4]int{9, 9, 0, 0}, [4]int{9, 5, 0, 0}), Decision{AtLimit: true}},
		{"the pod cap stops growth in prefix mode",
			pd(Targets{WarmPrefix: 1, MaxPods: 110}), prefixENIs([4]int{7, 110, 0, 0}), Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.targets.Decide(m5large, tc.counts)
			if got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWarmTargetArithmetic(t *testing.T) {
	m5large := Limits{MaxENIs: 3, IPsPerENI: 9}
	for _, tc := range []struct {
		name    string
		targets Targets
		limits  Limits
		counts  Counts
		want    Decision
	}{
		{"an empty primary with WARM_ENI_TARGET=1 fills the primary first",
			Targets{WarmENI: 1}, m5large, enis([4]int{0, 0, 0, 0}), Decision{AddIPs: 9}},
		{"a full primary with one pod asks for a new ENI of a whole ENI's worth",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 1, 0, 0}), Decision{NewENI: true, NewENIIPs: 9}},
		{"a warm ENI's worth of free IPs is enough",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 0, 0, 0}), Decision{}},
		{"cooldown IPs do not count as free",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 0, 9, 0}, [4]int{0, 0, 0, 0}), Decision{AddIPs: 9}},
		{"WARM_IP_TARGET=5 with 2 free adds 3",
			Targets{WarmIP: 5}, m5large, enis([4]int{4, 2, 0, 0}), Decision{AddIPs: 3}},
		{"MINIMUM_IP_TARGET=12 with WARM_IP_TARGET=2 pre-scales to 12",
			Targets{WarmIP: 2, MinimumIP: 12}, m5large, enis([4]int{9, 0, 0, 0}), Decision{NewENI: true, NewENIIPs: 3}},
		{"WARM_IP_TARGET=2 with 6 free releases 4",
			Targets{WarmIP: 2}, m5large, enis([4]int{6, 0, 0, 0}), Decision{ReleaseIPs: 4}},
		{"MINIMUM_IP_TARGET keeps IPs that WARM_IP_TARGET alone would release",
			Targets{WarmIP: 2, MinimumIP: 8}, m5large, enis([4]int{9, 0, 0, 0}), Decision{ReleaseIPs: 1}},
		{"MAX_ENI=1 stops growth at the primary",
			Targets{WarmENI: 1, MaxENI: 1}, m5large, enis([4]int{9, 5, 0, 0}), Decision{AtLimit: true}},
		{"the instance's ENI limit stops growth",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 9, 0, 0}, [4]int{9, 9, 0, 0}, [4]int{9, 5, 0, 0}), Decision{AtLimit: true}},
		{"MAX_PODS caps the IPs the pool holds",
			Targets{WarmENI: 1, MaxPods: 11}, m5large, enis([4]int{9, 5, 0, 0}), Decision{NewENI: true, NewENIIPs: 2}},
		{"more IPs than MAX_PODS are released",
			Targets{WarmENI: 1, MaxPods: 5}, m5large, enis([4]int{9, 1, 0, 0}), Decision{ReleaseIPs: 4}},
		{"a pending ENI that covers the deficit is waited for rather than planning another",
			Targets{WarmENI: 1}, m5large, Counts{ENIs: enis([4]int{9, 9, 0, 0}).ENIs, PendingENIs: 1, PendingIPs: 9}, Decision{}},
		{"a deficit of two ENIs plans the second while the first is pending",
			Targets{WarmENI: 2}, m5large, Counts{ENIs: enis([4]int{9, 9, 0, 0}).ENIs, PendingENIs: 1, PendingIPs: 9}, Decision{NewENI: true, NewENIIPs: 9}},
		{"a pending ENI created with fewer IPs than it can hold takes the rest once usable: no second ENI",
			Targets{WarmIP: 2}, m5large, Counts{ENIs: enis([4]int{9, 9, 0, 0}).ENIs, PendingENIs: 1, PendingIPs: 1}, Decision{}},
		{"a deficit beyond a pending ENI's room still plans another",
			Targets{WarmIP: 12}, m5large, Counts{ENIs: enis([4]int{9, 9, 0, 0}).ENIs, PendingENIs: 1, PendingIPs: 1}, Decision{NewENI: true, NewENIIPs: 9}},
		{"a closed primary's room does not count: a new ENI is planned",
			Targets{WarmENI: 1}, m5large, Counts{ENIs: []ENICount{{ID: "a", Primary: true, Closed: true}}}, Decision{NewENI: true, NewENIIPs: 9}},
		{"IPs being assigned count toward the target",
			Targets{WarmIP: 5}, m5large, Counts{ENIs: enis([4]int{4, 2, 0, 0}).ENIs, PendingIPs: 3}, Decision{}},
		{"pending ENIs count against the instance's ENI limit",
			Targets{WarmENI: 3}, m5large, Counts{ENIs: enis([4]int{9, 9, 0, 0}, [4]int{9, 0, 0, 0}).ENIs, PendingENIs: 1, PendingIPs: 9}, Decision{}},
		{"an empty secondary ENI beyond WARM_ENI_TARGET is released",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 0, 0, 0}, [4]int{9, 0, 0, 0}), Decision{ReleaseENI: "b"}},
		{"an empty ENI that holds the warm target is kept",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 9, 0, 0}, [4]int{9, 0, 0, 0}), Decision{}},
		{"an ENI with IPs in cooldown is kept",
			Targets{WarmENI: 1}, m5large, enis([4]int{9, 0, 0, 0}, [4]int{9, 0, 1, 0}), Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.targets.Decide(tc.limits, tc.counts)
			if got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}
