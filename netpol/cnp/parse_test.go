package cnp

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestParseReadsEveryShapeTheAPIAdmitsUnderBothVersions(t *testing.T) {
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"a namespaces subject with namespaces peers and no ports", `
tier: Admin
priority: 16
subject:
  namespaces:
    matchLabels:
      kubernetes.io/metadata.name: gryffindor
ingress:
- name: allow-from-ravenclaw
  action: Accept
  from:
  - namespaces:
      matchLabels:
        kubernetes.io/metadata.name: ravenclaw
egress:
- name: deny-to-every-house
  action: Deny
  to:
  - namespaces:
      matchExpressions:
      - key: house
        operator: Exists
`, `Admin 16 subject ns{kubernetes.io/metadata.name=gryffindor} pods{}
ingress[0] Accept "allow-from-ravenclaw" peers[namespaces ns{kubernetes.io/metadata.name=ravenclaw} pods{}] ports[any]
egress[0] Deny "deny-to-every-house" peers[namespaces ns{house} pods{}] ports[any]
`},
		{"a pods subject without a namespace selector selects its pods in every namespace", `
tier: Baseline
priority: 20
subject:
  pods:
    podSelector:
      matchLabels:
        house: gryffindor
ingress:
- action: Deny
  from:
  - pods:
      podSelector:
        matchLabels:
          house: slytherin
  - pods:
      namespaceSelector:
        matchLabels:
          house: hufflepuff
      podSelector: {}
`, `Baseline 20 subject ns{} pods{house=gryffindor}
ingress[0] Deny peers[pods ns{} pods{house=slytherin}; pods ns{house=hufflepuff} pods{}] ports[any]
`},
		{"every selector operator", `
tier: Admin
priority: 3
subject:
  pods:
    namespaceSelector:
      matchExpressions:
      - {key: house, operator: In, values: [gryffindor, ravenclaw]}
      - {key: closed, operator: DoesNotExist}
    podSelector:
      matchExpressions:
      - {key: role, operator: NotIn, values: [ghost]}
egress:
- action: Pass
  to:
  - namespaces: {}
`, `Admin 3 subject ns{!closed,house in (gryffindor,ravenclaw)} pods{role notin (ghost)}
egress[0] Pass peers[namespaces ns{} pods{}] ports[any]
`},
		{"tcp, udp and sctp ports and ranges", `
tier: Admin
priority: 9
subject:
  namespaces: {}
ingress:
- action: Accept
  from:
  - namespaces: {}
  protocols:
  - tcp:
      destinationPort:
        number: 80
  - udp:
      destinationPort:
        range: {start: 53, end: 5353}
  - sctp:
      destinationPort:
        number: 9003
  - tcp:
      destinationPort:
        range: {start: 1, end: 65535}
`, `Admin 9 subject ns{} pods{}
ingress[0] Accept peers[namespaces ns{} pods{}] ports[tcp/80 udp/53-5353 sctp/9003 tcp/1-65535]
`},
		{"ports by name, on ingress and towards pods", `
tier: Admin
priority: 4
subject:
  namespaces: {}
ingress:
- action: Accept
  from:
  - namespaces: {}
  protocols:
  - destinationNamedPort: web
egress:
- action: Accept
  to:
  - pods:
      podSelector: {matchLabels: {app: db}}
  - namespaces: {}
  protocols:
  - destinationNamedPort: postgres
  - tcp:
      destinationPort: {number: 5432}
`, `Admin 4 subject ns{} pods{}
ingress[0] Accept peers[namespaces ns{} pods{}] ports[named/web]
egress[0] Accept peers[pods ns{} pods{app=db}; namespaces ns{} pods{}] ports[named/postgres tcp/5432]
`},
		{"nodes and networks peers of both families", `
tier: Admin
priority: 75
subject:
  namespaces: {}
egress:
- action: Accept
  to:
  - nodes:
      matchLabels:
        kubernetes.io/os: linux
  protocols:
  - tcp:
      destinationPort: {number: 10250}
- action: Deny
  to:
  - networks: [10.0.0.0/8, 192.168.1.7/32, "fd00::/8", "2001:db8::1/128"]
  - networks: [0.0.0.0/0, "::/0", "0::/0"]
  - nodes: {}
`, `Admin 75 subject ns{} pods{}
egress[0] Accept peers[nodes{kubernetes.io/os=linux}] ports[tcp/10250]
egress[1] Deny peers[networks 10.0.0.0/8,192.168.1.7/32,fd00::/8,2001:db8::1/128; networks 0.0.0.0/0,::/0; nodes{}] ports[any]
`},
		{"the lowest priority, and no rules at all", `
tier: Baseline
priority: 0
subject:
  namespaces: {}
ingress: []
`, "Baseline 0 subject ns{} pods{}\n"},
		{"the highest priority", "tier: Admin\npriority: 1000\nsubject:\n  namespaces: {}\n", "Admin 1000 subject ns{} pods{}\n"},
	} {
		for _, version := range versions {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				p, err := Parse(decode(t, manifest(version, "cnp", tc.spec)))
				if err != nil {
					t.Fatal(err)
				}
				if got := summary(p); got != tc.want {
					t.Errorf("got\n%s\nwant\n%s", got, tc.want)
				}
				if p.Name != "cnp" || len(p.Warnings) > 0 {
					t.Errorf("name %q, warnings %q", p.Name, p.Warnings)
				}
			})
		}
	}
}

func TestParseTakesEveryLimitOfTheCRDAtItsEdge(t *testing.T) {
	spec := head + "ingress:\n" + repeat(maxRules, "- {action: Deny, from: [{namespaces: {}}]}\n") +
		"egress:\n" + repeat(maxRules-1, "- {action: Deny, to: [{namespaces: {}}]}\n") +
		"- name: " + strings.Repeat("n", maxRuleName) + "\n  action: Accept\n  to:\n" +
		repeat(maxPeers-1, "  - namespaces: {matchLabels: {house: h%d}}\n") +
		"  - networks: [" + strings.TrimSuffix(repeat(maxNetworks, "10.%d.0.0/16,"), ",") + "]\n" +
		"  protocols:\n" + repeat(maxProtocols, "  - tcp: {destinationPort: {number: 8%d}}\n")
	p, err := Parse(decode(t, manifest(versions[0], "edges", spec)))
	if err != nil {
		t.Fatal(err)
	}
	last := p.Egress[len(p.Egress)-1]
	if len(p.Ingress) != maxRules || len(p.Egress) != maxRules || len(last.Peers) != maxPeers ||
		len(last.Peers[maxPeers-1].Networks) != maxNetworks || len(last.Ports) != maxProtocols {
		t.Errorf("got %d ingress and %d egress rules, a last rule of %d peers, %d networks and %d ports",
			len(p.Ingress), len(p.Egress), len(last.Peers), len(last.Peers[maxPeers-1].Networks), len(last.Ports))
	}
}

func TestAPeerOfNoKnownFieldFailsItsRuleClosed(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		want        string // the summary's rule lines
		warning     string // the warning's field path and what it says
	}{
		{"an Accept rule with a peer of a newer CRD matches nothing", `
ingress:
- action: Accept
  from:
  - namespaces: {}
  - serviceAccounts: {name: web}
`, "ingress[0] Accept peers[namespaces ns{} pods{}] ports[any] matches-nothing\n",
			"spec.ingress[0].from[1]: eniwire knows no peer field serviceAccounts; failing closed, the rule matches no traffic"},
		{"a Deny rule with a peer of a newer CRD denies all", `
egress:
- action: Deny
  to:
  - futurePeer: {}
  protocols:
  - tcp: {destinationPort: {number: 80}}
`, "egress[0] Deny peers[] ports[tcp/80] denies-all\n",
			"spec.egress[0].to[0]: eniwire knows no peer field futurePeer; failing closed, the Deny rule denies all traffic of its direction"},
		{"a Pass rule with a domainNames peer denies all", `
egress:
- action: Pass
  to:
  - domainNames: ["*.example.com"]
`, "egress[0] Pass peers[] ports[any] denies-all\n",
			"spec.egress[0].to[0]: eniwire does not implement domainNames peers; failing closed, the Pass rule denies all traffic of its direction"},
		{"an Accept rule with a domainNames peer matches nothing", `
egress:
- action: Accept
  to:
  - domainNames: [kubernetes.io]
`, "egress[0] Accept peers[] ports[any] matches-nothing\n",
			"spec.egress[0].to[0]: eniwire does not implement domainNames peers; failing closed, the rule matches no traffic"},
		{"an empty peer fails closed", `
ingress:
- action: Deny
  from:
  - {}
`, "ingress[0] Deny peers[] ports[any] denies-all\n",
			"spec.ingress[0].from[0]: it sets no peer field eniwire knows; failing closed"},
		{"networks is no ingress peer", `
ingress:
- action: Accept
  from:
  - networks: [10.0.0.0/8]
`, "ingress[0] Accept peers[] ports[any] matches-nothing\n",
			"spec.ingress[0].from[0]: eniwire knows no peer field networks"},
	} {
		for _, version := range versions {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				p, err := Parse(decode(t, manifest(version, "closed", head+tc.rules)))
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.SplitN(summary(p), "\n", 2)[1]; got != tc.want {
					t.Errorf("got\n%s\nwant\n%s", got, tc.want)
				}
				if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], `ClusterNetworkPolicy "closed": `+tc.warning) {
					t.Errorf("warnings %q, want one saying %q", p.Warnings, tc.warning)
				}
			})
		}
	}
}

func TestAPortNameNoContainerCanHaveIsKeptAndWarnedOf(t *testing.T) {
	p, err := Parse(decode(t, manifest(versions[0], "names", head+`
ingress:
- action: Accept
  from: [{namespaces: {}}]
  protocols:
  - destinationNamedPort: Not_A_Port_Name
`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := ports(p.Ingress[0].Ports); got != "named/Not_A_Port_Name" {
		t.Errorf("ports %s", got)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "spec.ingress[0].protocols[0].destinationNamedPort: \"Not_A_Port_Name\" can be no container port's name") {
		t.Errorf("warnings %q", p.Warnings)
	}
}

func TestParsedSelectorsMatchAsTheAPISays(t *testing.T) {
	p, err := Parse(decode(t, manifest(versions[0], "match", `
tier: Admin
priority: 1
subject:
  pods:
    podSelector: {matchLabels: {app: web}}
egress:
- action: Deny
  to:
  - namespaces: {matchLabels: {house: slytherin}}
`)))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Subject
	if !s.Namespaces.Matches(labels.Set{"any": "namespace"}) || !s.Pods.Matches(labels.Set{"app": "web"}) || s.Pods.Matches(labels.Set{"app": "db"}) {
		t.Error("the subject should be every pod labelled app=web, in every namespace")
	}
	pe := p.Egress[0].Peers[0]
	if !pe.Pods.Matches(labels.Set{"whatever": "pod"}) || pe.Namespaces.Matches(labels.Set{"house": "gryffindor"}) {
		t.Error("a namespaces peer should be every pod of the namespaces it selects")
	}
}
