package tiers

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

const (
	tcp  = 6
	udp  = 17
	icmp = 1
)

// rule is a rule of policy at priority, its index in the policy, its peers comma-separated.
func rule(policy string, priority int32, index int, a Action, peers string, ports ...dptypes.PortRange) Rule {
	r := Rule{Policy: policy, Priority: priority, Index: index, Action: a, Ports: ports}
	for _, p := range strings.Split(peers, ",") {
		r.Peers = append(r.Peers, netip.MustParsePrefix(p))
	}
	return r
}

func ports(protocol uint8, first, last uint16) dptypes.PortRange {
	return dptypes.PortRange{Protocol: protocol, First: first, Last: last}
}

func port(protocol uint8, p uint16) dptypes.PortRange { return ports(protocol, p, p) }

func entry(peer string, rs ...dptypes.PortRange) dptypes.PeerPorts {
	return dptypes.PeerPorts{Peer: netip.MustParsePrefix(peer), Ports: rs}
}

func ref(policy string, priority int32, index int) *RuleRef {
	return &RuleRef{Policy: policy, Priority: priority, Index: index}
}

// probe is a flow and the Decision Judge owes it.
type probe struct {
	peer     string
	protocol uint8
	port     uint16
	want     Decision
}

func byRule(allowed bool, t Tier, r *RuleRef, passed ...*RuleRef) Decision {
	d := Decision{Allowed: allowed, Tier: t, Rule: r}
	for _, p := range passed {
		d.Passed = append(d.Passed, *p)
	}
	return d
}

// byNetworkPolicy is a decision of the NetworkPolicy tier reading the entry of prefix ("" for none).
func byNetworkPolicy(allowed bool, prefix string, passed ...*RuleRef) Decision {
	d := byRule(allowed, NetworkPolicy, nil, passed...)
	if prefix != "" {
		d.NetworkPolicyEntry = netip.MustParsePrefix(prefix)
	}
	return d
}

func byDefault(passed ...*RuleRef) Decision { return byRule(true, Default, nil, passed...) }

// TestJudgeAndFlattenFollowTheTiers checks each rule of the evaluation on Judge's full Decision, and that
// Flatten's entries, read as the datapath reads them, give the same verdict.
func TestJudgeAndFlattenFollowTheTiers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      Direction
		probes []probe
	}{{
		name: "the policy of the lowest priority decides, whatever the order given",
		d: Direction{Admin: []Rule{
			rule("allow-web", 20, 0, Accept, "10.0.0.0/24"),
			rule("block-ssh", 10, 0, Deny, "10.0.0.0/24", port(tcp, 22)),
		}},
		probes: []probe{
			{"10.0.0.5", tcp, 22, byRule(false, Admin, ref("block-ssh", 10, 0))},
			{"10.0.0.5", tcp, 80, byRule(true, Admin, ref("allow-web", 20, 0))},
			{"10.0.1.5", tcp, 22, byDefault()},
		},
	}, {
		name: "within a policy the first rule by index decides, whatever the order given",
		d: Direction{Admin: []Rule{
			rule("p", 5, 1, Deny, "10.0.0.0/24"),
			rule("p", 5, 0, Accept, "10.0.0.0/24", port(tcp, 80)),
		}},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byRule(true, Admin, ref("p", 5, 0))},
			{"10.0.0.1", tcp, 81, byRule(false, Admin, ref("p", 5, 1))},
			{"10.0.0.1", icmp, 0, byRule(false, Admin, ref("p", 5, 1))},
		},
	}, {
		name: "an admin Pass skips later admin rules and leaves the flow to NetworkPolicy",
		d: Direction{
			Admin: []Rule{
				rule("pass", 1, 0, Pass, "10.0.0.0/24"),
				rule("accept", 50, 0, Accept, "10.0.0.0/24"),
			},
			Isolated:      true,
			NetworkPolicy: []dptypes.PeerPorts{entry("10.0.0.0/16", port(tcp, 443))},
		},
		probes: []probe{
			{"10.0.0.9", tcp, 443, byNetworkPolicy(true, "10.0.0.0/16", ref("pass", 1, 0))},
			{"10.0.0.9", tcp, 80, byNetworkPolicy(false, "10.0.0.0/16", ref("pass", 1, 0))},
			{"10.0.1.9", tcp, 80, byNetworkPolicy(false, "10.0.0.0/16")},
			{"10.9.0.1", tcp, 443, byNetworkPolicy(false, "")},
		},
	}, {
		name: "an admin Pass goes on to the baseline when NetworkPolicy does not isolate the pod",
		d: Direction{
			Admin:    []Rule{rule("pass", 1, 0, Pass, "10.0.0.0/24")},
			Baseline: []Rule{rule("no-ssh", 0, 0, Deny, "10.0.0.0/8", port(tcp, 22))},
			// Not isolated: these entries are not read.
			NetworkPolicy: []dptypes.PeerPorts{entry("10.0.0.0/24")},
		},
		probes: []probe{
			{"10.0.0.1", tcp, 22, byRule(false, Baseline, ref("no-ssh", 0, 0), ref("pass", 1, 0))},
			{"10.0.0.1", tcp, 80, byDefault(ref("pass", 1, 0))},
			{"10.1.0.1", tcp, 22, byRule(false, Baseline, ref("no-ssh", 0, 0))},
		},
	}, {
		name: "a baseline Pass goes on to the default",
		d: Direction{Baseline: []Rule{
			rule("pass", 0, 0, Pass, "10.0.0.0/24"),
			rule("deny", 1, 0, Deny, "0.0.0.0/0"),
		}},
		probes: []probe{
			{"10.0.0.1", udp, 53, byDefault(ref("pass", 0, 0))},
			{"10.0.1.1", udp, 53, byRule(false, Baseline, ref("deny", 1, 0))},
		},
	}, {
		name: "isolated, NetworkPolicy is final: a baseline Accept is never reached",
		d: Direction{
			Isolated:      true,
			NetworkPolicy: []dptypes.PeerPorts{entry("10.0.0.0/24", port(tcp, 80))},
			Baseline:      []Rule{rule("accept-all", 0, 0, Accept, "0.0.0.0/0,::/0")},
		},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byNetworkPolicy(true, "10.0.0.0/24")},
			{"10.0.0.1", tcp, 81, byNetworkPolicy(false, "10.0.0.0/24")},
			{"192.168.0.1", tcp, 80, byNetworkPolicy(false, "")},
		},
	}, {
		name: "a NetworkPolicy allow overrides a baseline Deny",
		d: Direction{
			Isolated:      true,
			NetworkPolicy: []dptypes.PeerPorts{entry("10.0.0.0/16", ports(tcp, 8000, 8080))},
			Baseline:      []Rule{rule("deny-all", 0, 0, Deny, "0.0.0.0/0")},
		},
		probes: []probe{
			{"10.0.3.3", tcp, 8080, byNetworkPolicy(true, "10.0.0.0/16")},
			{"10.0.3.3", tcp, 8081, byNetworkPolicy(false, "10.0.0.0/16")},
		},
	}, {
		name: "a Deny of a /32 before an Accept of its /16 holds there; after it, priority lets the /16 win",
		d: Direction{
			Admin: []Rule{
				rule("deny-one", 1, 0, Deny, "10.1.2.3/32"),
				rule("allow-net", 2, 0, Accept, "10.1.0.0/16"),
				rule("allow-other", 3, 0, Accept, "10.2.0.0/16"),
				rule("deny-other-one", 4, 0, Deny, "10.2.2.3/32"),
			},
			Isolated: true,
		},
		probes: []probe{
			{"10.1.2.3", tcp, 80, byRule(false, Admin, ref("deny-one", 1, 0))},
			{"10.1.2.4", tcp, 80, byRule(true, Admin, ref("allow-net", 2, 0))},
			{"10.2.2.3", tcp, 80, byRule(true, Admin, ref("allow-other", 3, 0))},
			{"10.3.0.1", tcp, 80, byNetworkPolicy(false, "")},
		},
	}, {
		name: "a rule without ports matches every protocol, one with ports only its own",
		d: Direction{Admin: []Rule{
			rule("web", 1, 0, Deny, "10.0.0.0/24", port(tcp, 80)),
			rule("tcp", 2, 0, Accept, "10.0.0.0/24", ports(tcp, 0, 65535)),
			rule("all", 3, 0, Deny, "10.0.0.0/24"),
			// A range of ICMP, which has no ports, matches nothing.
			rule("icmp", 0, 0, Accept, "10.0.0.0/24", ports(icmp, 0, 65535)),
		}},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byRule(false, Admin, ref("web", 1, 0))},
			{"10.0.0.1", tcp, 81, byRule(true, Admin, ref("tcp", 2, 0))},
			{"10.0.0.1", udp, 80, byRule(false, Admin, ref("all", 3, 0))},
			{"10.0.0.1", icmp, 0, byRule(false, Admin, ref("all", 3, 0))},
			{"10.0.1.1", icmp, 0, byDefault()},
		},
	}, {
		name: "at one priority the most restrictive answer wins: Deny over Pass over Accept",
		d: Direction{
			Admin: []Rule{
				rule("a-accept", 5, 0, Accept, "10.0.0.0/24"),
				rule("b-pass", 5, 0, Pass, "10.0.0.0/24", ports(tcp, 80, 81)),
				rule("c-deny", 5, 0, Deny, "10.0.0.0/24", port(tcp, 80)),
			},
			Isolated: true,
		},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byRule(false, Admin, ref("c-deny", 5, 0))},
			{"10.0.0.1", tcp, 81, byNetworkPolicy(false, "", ref("b-pass", 5, 0))},
			{"10.0.0.1", tcp, 82, byRule(true, Admin, ref("a-accept", 5, 0))},
		},
	}, {
		name: "at one priority the names do not change the verdict",
		d: Direction{
			Admin: []Rule{
				rule("z-accept", 5, 0, Accept, "10.0.0.0/24"),
				rule("y-pass", 5, 0, Pass, "10.0.0.0/24", ports(tcp, 80, 81)),
				rule("a-deny", 5, 0, Deny, "10.0.0.0/24", port(tcp, 80)),
			},
			Isolated: true,
		},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byRule(false, Admin, ref("a-deny", 5, 0))},
			{"10.0.0.1", tcp, 81, byNetworkPolicy(false, "", ref("y-pass", 5, 0))},
			{"10.0.0.1", tcp, 82, byRule(true, Admin, ref("z-accept", 5, 0))},
		},
	}, {
		name: "at one priority each policy answers with its first matching rule, not its most restrictive",
		d: Direction{Admin: []Rule{
			rule("a", 5, 0, Accept, "10.0.0.0/24", port(tcp, 80)),
			rule("a", 5, 1, Deny, "10.0.0.0/24"),
			rule("b", 5, 0, Pass, "10.0.0.0/24", ports(tcp, 80, 90)),
		}},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byDefault(ref("b", 5, 0))},
			{"10.0.0.1", tcp, 85, byRule(false, Admin, ref("a", 5, 1))},
		},
	}, {
		name: "equally restrictive answers at one priority name the first policy by name",
		d: Direction{Admin: []Rule{
			rule("b", 5, 0, Deny, "10.0.0.0/24"),
			rule("a", 5, 0, Deny, "10.0.0.0/24"),
		}},
		probes: []probe{{"10.0.0.1", tcp, 80, byRule(false, Admin, ref("a", 5, 0))}},
	}, {
		name: "IPv4 and IPv6 peers are judged side by side, an IPv4-mapped address as IPv6",
		d: Direction{
			Admin: []Rule{
				rule("v6-ssh", 1, 0, Deny, "fd00::/64", port(tcp, 22)),
				rule("v4", 2, 0, Accept, "10.0.0.0/8"),
			},
			Isolated:      true,
			NetworkPolicy: []dptypes.PeerPorts{entry("::/0", port(udp, 53)), entry("10.0.0.0/8")},
		},
		probes: []probe{
			{"fd00::1", tcp, 22, byRule(false, Admin, ref("v6-ssh", 1, 0))},
			{"fd00::1", udp, 53, byNetworkPolicy(true, "::/0")},
			{"2001:db8::1", tcp, 22, byNetworkPolicy(false, "::/0")},
			{"10.1.1.1", tcp, 22, byRule(true, Admin, ref("v4", 2, 0))},
			{"::ffff:10.1.1.1", tcp, 22, byNetworkPolicy(false, "::/0")},
			{"192.168.0.1", udp, 53, byNetworkPolicy(false, "")},
		},
	}, {
		name: "a NetworkPolicy entry without ports is a hole in the prefix around it",
		d: Direction{
			Isolated:      true,
			NetworkPolicy: []dptypes.PeerPorts{entry("10.0.0.0/16", port(tcp, 80)), entry("10.0.5.0/24")},
		},
		probes: []probe{
			{"10.0.4.1", tcp, 80, byNetworkPolicy(true, "10.0.0.0/16")},
			{"10.0.5.1", tcp, 80, byNetworkPolicy(false, "10.0.5.0/24")},
		},
	}, {
		name: "an action other than Accept, Deny and Pass fails closed",
		d:    Direction{Admin: []Rule{rule("odd", 0, 0, Action(9), "10.0.0.0/24")}},
		probes: []probe{
			{"10.0.0.1", tcp, 80, byRule(false, Admin, ref("odd", 0, 0))},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			flat := Flatten(tc.d)
			for _, p := range tc.probes {
				flow := fmt.Sprintf("%s proto %d port %d", p.peer, p.protocol, p.port)
				peer := netip.MustParseAddr(p.peer)
				if got := Judge(tc.d, peer, p.protocol, p.port); !reflect.DeepEqual(got, p.want) {
					t.Errorf("Judge(%s) = %+v, want %+v", flow, got, p.want)
				}
				if got := flat.Allows(peer, p.protocol, p.port); got != p.want.Allowed {
					t.Errorf("Flatten's entries allow %s: %v, want %v\n%v", flow, got, p.want.Allowed, flat.Entries)
				}
			}
		})
	}
}
