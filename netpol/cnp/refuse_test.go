package cnp

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRefusesWholeWhatTheAPIForbidsAtItsFieldPath(t *testing.T) {
	// egress2 puts a peer at spec.egress[2].to[0] with two valid rules before it.
	egress2 := head + "egress:\n" + repeat(2, "- {action: Deny, to: [{namespaces: {}}]}\n") + "- action: Deny\n  to:\n  - "
	for _, tc := range []struct {
		name, spec string
		path       string // the first error's field
		says       string // and what it says
	}{
		{"no spec", "", "spec", "Required value"},
		{"no tier", "priority: 1\nsubject: {namespaces: {}}\n", "spec.tier", "Required value"},
		{"a tier of another case", "tier: admin\npriority: 1\nsubject: {namespaces: {}}\n", "spec.tier", `Unsupported value: "admin"`},
		{"no priority", "tier: Admin\nsubject: {namespaces: {}}\n", "spec.priority", "Required value"},
		{"a negative priority", "tier: Admin\npriority: -1\nsubject: {namespaces: {}}\n", "spec.priority", "between 0 and 1000"},
		{"a priority over 1000", "tier: Admin\npriority: 1001\nsubject: {namespaces: {}}\n", "spec.priority", "between 0 and 1000"},
		{"a priority that would wrap into range as an int32", "tier: Admin\npriority: 4294967301\nsubject: {namespaces: {}}\n", "spec.priority", "between 0 and 1000"},
		{"a priority as a string", "tier: Admin\npriority: \"5\"\nsubject: {namespaces: {}}\n", "spec.priority", "must be an integer"},
		{"no subject", "tier: Admin\npriority: 1\n", "spec.subject", "Required value"},
		{"an empty subject", "tier: Admin\npriority: 1\nsubject: {}\n", "spec.subject", "exactly one of namespaces, pods must be set"},
		{"a subject of a newer CRD", "tier: Admin\npriority: 1\nsubject: {serviceAccounts: {}}\n", "spec.subject", "eniwire knows no field serviceAccounts"},
		{"a subject of both forms", "tier: Admin\npriority: 1\nsubject: {namespaces: {}, pods: {podSelector: {}}}\n", "spec.subject", "exactly one of namespaces, pods may be set"},
		{"a pods subject without podSelector", "tier: Admin\npriority: 1\nsubject: {pods: {namespaceSelector: {}}}\n", "spec.subject.pods.podSelector", "Required value"},
		{"an unknown selector operator", "tier: Admin\npriority: 1\nsubject:\n  namespaces:\n    matchExpressions: [{key: a, operator: Like, values: [b]}]\n",
			"spec.subject.namespaces.matchExpressions[0].operator", "not a valid selector operator"},
		{"In without values", head + "ingress:\n- action: Deny\n  from:\n  - pods: {podSelector: {matchExpressions: [{key: a, operator: In}]}}\n",
			"spec.ingress[0].from[0].pods.podSelector.matchExpressions[0].values", "Required value"},
		{"Exists with values", head + "egress:\n- action: Deny\n  to:\n  - nodes: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}\n",
			"spec.egress[0].to[0].nodes.matchExpressions[0].values", "Forbidden"},
		{"an invalid label value", head + "ingress:\n- action: Deny\n  from:\n  - namespaces: {matchLabels: {house: \"not a value\"}}\n",
			"spec.ingress[0].from[0].namespaces.matchLabels", "Invalid value"},
		{"an invalid label key", head + "ingress:\n- action: Deny\n  from:\n  - pods: {namespaceSelector: {matchLabels: {\"-bad\": x}}, podSelector: {}}\n",
			"spec.ingress[0].from[0].pods.namespaceSelector.matchLabels", "Invalid value"},
		{"a selector that is not an object", head + "ingress:\n- action: Deny\n  from:\n  - namespaces: everything\n",
			"spec.ingress[0].from[0].namespaces", "must be an object"},
		{"26 ingress rules", head + "ingress:\n" + repeat(26, "- {action: Deny, from: [{namespaces: {}}]}\n"), "spec.ingress", "must have at most 25 items"},
		{"26 egress rules", head + "egress:\n" + repeat(26, "- {action: Deny, to: [{namespaces: {}}]}\n"), "spec.egress", "must have at most 25 items"},
		{"rules that are not a list", head + "egress: {action: Deny}\n", "spec.egress", "must be a list"},
		{"no action", head + "ingress:\n- from: [{namespaces: {}}]\n", "spec.ingress[0].action", "Required value"},
		{"an unknown action", head + "ingress:\n- action: Allow\n  from: [{namespaces: {}}]\n", "spec.ingress[0].action", `Unsupported value: "Allow"`},
		{"a rule name over 100 bytes", head + "egress:\n- name: " + strings.Repeat("n", 101) + "\n  action: Deny\n  to: [{namespaces: {}}]\n",
			"spec.egress[0].name", "may not be more than 100 bytes"},
		{"no from", head + "ingress:\n- action: Deny\n", "spec.ingress[0].from", "Required value"},
		{"an empty to", head + "egress:\n- action: Deny\n  to: []\n", "spec.egress[0].to", "at least one item"},
		{"26 peers", head + "egress:\n- action: Deny\n  to:\n" + repeat(26, "  - namespaces: {}\n"), "spec.egress[0].to", "must have at most 25 items"},
		{"a peer of two fields", head + "egress:\n- action: Deny\n  to:\n  - {namespaces: {}, networks: [10.0.0.0/8]}\n",
			"spec.egress[0].to[0]", "exactly one of namespaces, pods, nodes, networks, domainNames may be set"},
		{"a peer of a known and an unimplemented field", head + "egress:\n- action: Accept\n  to:\n  - {domainNames: [a.io], networks: [10.0.0.0/8]}\n",
			"spec.egress[0].to[0]", "may be set"},
		{"a pods peer without podSelector", head + "egress:\n- action: Deny\n  to:\n  - pods: {namespaceSelector: {}}\n",
			"spec.egress[0].to[0].pods.podSelector", "Required value"},
		{"a network that is no CIDR", egress2 + "networks: [10.0.0.0/8, 10.0.0.300/32]\n", "spec.egress[2].to[0].networks[1]", "not a CIDR"},
		{"a network without a length", egress2 + "networks: [10.0.0.1]\n", "spec.egress[2].to[0].networks[0]", "not a CIDR"},
		{"a network with bits past its length", egress2 + "networks: [10.1.2.3/8]\n", "spec.egress[2].to[0].networks[0]", "the network is 10.0.0.0/8"},
		{"an IPv4-mapped network", egress2 + "networks: [\"::ffff:10.0.0.0/104\"]\n", "spec.egress[2].to[0].networks[0]", "IPv4-mapped"},
		{"a network given twice", egress2 + "networks: [10.0.0.0/8, 10.0.0.0/8]\n", "spec.egress[2].to[0].networks[1]", "Duplicate value"},
		{"no networks", egress2 + "networks: []\n", "spec.egress[2].to[0].networks", "at least one item"},
		{"26 networks", egress2 + "networks: [" + strings.TrimSuffix(repeat(26, "10.%d.0.0/16,"), ",") + "]\n",
			"spec.egress[2].to[0].networks", "must have at most 25 items"},
		{"a network that is not a string", egress2 + "networks: [10]\n", "spec.egress[2].to[0].networks[0]", "must be a string"},
	} {
		for _, version := range versions {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				refused(t, manifest(version, "bad", tc.spec), tc.path, tc.says)
			})
		}
	}
}

func TestParseRefusesPortsTheAPIForbids(t *testing.T) {
	rule := head + "ingress:\n- action: Accept\n  from: [{namespaces: {}}]\n  protocols:\n"
	for _, tc := range []struct {
		name, protocols string
		path, says      string
	}{
		{"no protocols", "    []\n", "spec.ingress[0].protocols", "at least one item"},
		{"26 protocols", repeat(26, "  - tcp: {destinationPort: {number: 8%d}}\n"), "spec.ingress[0].protocols", "must have at most 25 items"},
		{"an empty entry", "  - {}\n", "spec.ingress[0].protocols[0]", "exactly one of tcp, udp, sctp, destinationNamedPort must be set"},
		{"an entry of a newer CRD", "  - icmp: {type: 8}\n", "spec.ingress[0].protocols[0]", "eniwire knows no field icmp"},
		{"an entry of two protocols", "  - {tcp: {destinationPort: {number: 1}}, udp: {destinationPort: {number: 1}}}\n",
			"spec.ingress[0].protocols[0]", "may be set"},
		{"a protocol without destinationPort", "  - tcp: {}\n", "spec.ingress[0].protocols[0].tcp.destinationPort", "Required value"},
		{"a destinationPort of neither form", "  - udp: {destinationPort: {}}\n", "spec.ingress[0].protocols[0].udp.destinationPort",
			"exactly one of number, range must be set"},
		{"a destinationPort of both forms", "  - udp: {destinationPort: {number: 5, range: {start: 1, end: 9}}}\n",
			"spec.ingress[0].protocols[0].udp.destinationPort", "may be set"},
		{"port 0", "  - tcp: {destinationPort: {number: 0}}\n", "spec.ingress[0].protocols[0].tcp.destinationPort.number", "between 1 and 65535"},
		{"port 65536", "  - sctp: {destinationPort: {number: 65536}}\n", "spec.ingress[0].protocols[0].sctp.destinationPort.number", "between 1 and 65535"},
		{"a port that is not whole", "  - tcp: {destinationPort: {number: 80.5}}\n", "spec.ingress[0].protocols[0].tcp.destinationPort.number", "must be an integer"},
		{"a range from high to low", "  - tcp: {destinationPort: {range: {start: 8080, end: 80}}}\n",
			"spec.ingress[0].protocols[0].tcp.destinationPort.range", "start must be less than end"},
		{"a range of one port", "  - tcp: {destinationPort: {range: {start: 80, end: 80}}}\n",
			"spec.ingress[0].protocols[0].tcp.destinationPort.range", "start must be less than end"},
		{"a range past 65535", "  - udp: {destinationPort: {range: {start: 80, end: 70000}}}\n",
			"spec.ingress[0].protocols[0].udp.destinationPort.range.end", "between 1 and 65535"},
		{"a range without end", "  - udp: {destinationPort: {range: {start: 80}}}\n",
			"spec.ingress[0].protocols[0].udp.destinationPort.range.end", "Required value"},
		{"an empty port name", "  - destinationNamedPort: \"\"\n", "spec.ingress[0].protocols[0].destinationNamedPort", "must not be empty"},
	} {
		for _, version := range versions {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				refused(t, manifest(version, "bad", rule+tc.protocols), tc.path, tc.says)
			})
		}
	}
}

func TestParseRefusesAPortByNameTowardsAddresses(t *testing.T) {
	for _, peer := range []string{"networks: [10.0.0.0/8]", "nodes: {}", "domainNames: [kubernetes.io]"} {
		for _, version := range versions {
			t.Run(strings.TrimSuffix(strings.Fields(peer)[0], ":")+"/"+version, func(t *testing.T) {
				spec := head + "egress:\n- action: Accept\n  to:\n  - pods: {podSelector: {}}\n  - " + peer +
					"\n  protocols:\n  - tcp: {destinationPort: {number: 80}}\n  - destinationNamedPort: http\n"
				err := refused(t, manifest(version, "bad", spec), "spec.egress[0].protocols[1].destinationNamedPort", "Forbidden")
				if !strings.Contains(err.Error(), "spec.egress[0].to[1]") {
					t.Errorf("%v: does not name the peer", err)
				}
			})
		}
	}
}

func TestParseRefusesAnotherVersionOrKind(t *testing.T) {
	for _, tc := range []struct {
		name, apiVersion, kind, path string
	}{
		{"the old AdminNetworkPolicy version", "policy.networking.k8s.io/v1alpha1", "ClusterNetworkPolicy", "apiVersion"},
		{"NetworkPolicy's group", "networking.k8s.io/v1", "ClusterNetworkPolicy", "apiVersion"},
		{"another kind", "policy.networking.k8s.io/v1beta1", "AdminNetworkPolicy", "kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.NewReplacer("policy.networking.k8s.io/v1beta1", tc.apiVersion, "kind: ClusterNetworkPolicy", "kind: "+tc.kind).
				Replace(manifest(versions[0], "bad", head))
			refused(t, doc, tc.path, "Unsupported value")
		})
	}
}

func TestParseTellsEveryProblemNotTheFirstAlone(t *testing.T) {
	err := refused(t, manifest(versions[0], "many", `
tier: Middle
priority: 2000
subject: {namespaces: {}}
egress:
- action: Deny
  to: [{networks: [10.0.0.0/33]}]
`), "spec.tier", "Unsupported value")
	var inv *InvalidError
	errors.As(err, &inv)
	var fields []string
	for _, e := range inv.Errs {
		fields = append(fields, e.Field)
	}
	if want := "spec.tier spec.priority spec.egress[0].to[0].networks[0]"; strings.Join(fields, " ") != want {
		t.Errorf("fields %v, want %s", fields, want)
	}
}

// refused parses doc, which must be refused with an *InvalidError naming the policy, whose first problem is at
// path and says says, and returns the error.
func refused(t *testing.T, doc, path, says string) error {
	t.Helper()
	p, err := Parse(decode(t, doc))
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("got %v (policy %v), want an *InvalidError", err, p)
	}
	if p != nil {
		t.Errorf("a refused policy is returned: %v", p)
	}
	if inv.Policy != "bad" && inv.Policy != "many" {
		t.Errorf("names policy %q", inv.Policy)
	}
	first := inv.Errs[0]
	if first.Field != path || !strings.Contains(first.Error(), says) {
		t.Errorf("first problem %q, want one at %s saying %q", first.Error(), path, says)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, `ClusterNetworkPolicy "`+inv.Policy+`" refused: `) || !strings.Contains(msg, path) {
		t.Errorf("message %q does not name the policy and %s", msg, path)
	}
	return err
}
