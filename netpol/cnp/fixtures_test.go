package cnp

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// versions are the apiVersions every table runs under.
var versions = []string{"policy.networking.k8s.io/v1beta1", "policy.networking.k8s.io/v1alpha2"}

// decode reads one YAML document into what a dynamic informer holds: JSON decoded by unstructured's own
// scheme, so integers are int64 as they come from the API server.
func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("YAML: %v\n%s", err, doc)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("decoding: %v\n%s", err, doc)
	}
	return u
}

// manifest is a ClusterNetworkPolicy named name, of apiVersion version, whose spec is the YAML given.
func manifest(version, name, spec string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: %s\nkind: ClusterNetworkPolicy\nmetadata:\n  name: %s\nspec:\n", version, name)
	for line := range strings.Lines(spec) {
		b.WriteString("  " + line)
	}
	return b.String()
}

// head is the start of a valid spec, for cases about the rules.
const head = `tier: Admin
priority: 10
subject:
  namespaces: {}
`

// repeat is n copies of the YAML given, each with %d replaced by its index.
func repeat(n int, format string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.ReplaceAll(format, "%d", fmt.Sprint(i)))
	}
	return b.String()
}

// summary writes a policy in a line per rule, so that a test says what it expects at a glance.
func summary(p *Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d subject %s\n", p.Tier, p.Priority, selection(p.Subject))
	for _, d := range []struct {
		name  string
		rules []Rule
	}{{"ingress", p.Ingress}, {"egress", p.Egress}} {
		for i, r := range d.rules {
			fmt.Fprintf(&b, "%s[%d] %s", d.name, i, r.Action)
			if r.Name != "" {
				fmt.Fprintf(&b, " %q", r.Name)
			}
			var peers []string
			for _, pe := range r.Peers {
				peers = append(peers, peer(pe))
			}
			fmt.Fprintf(&b, " peers[%s] ports[%s]", strings.Join(peers, "; "), ports(r.Ports))
			switch {
			case r.MatchesNothing():
				b.WriteString(" matches-nothing")
			case r.DeniesAll():
				b.WriteString(" denies-all")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func selector(s labels.Selector) string {
	if s == nil {
		return "nil"
	}
	return "{" + s.String() + "}"
}

func selection(s PodSelection) string {
	return "ns" + selector(s.Namespaces) + " pods" + selector(s.Pods)
}

func peer(pe Peer) string {
	switch pe.Kind {
	case PeerNamespaces, PeerPods:
		return string(pe.Kind) + " " + selection(pe.PodSelection)
	case PeerNodes:
		return "nodes" + selector(pe.Nodes)
	case PeerNetworks:
		var ns []string
		for _, n := range pe.Networks {
			ns = append(ns, n.String())
		}
		return "networks " + strings.Join(ns, ",")
	}
	return "unknown kind " + string(pe.Kind)
}

func ports(ps []Port) string {
	if ps == nil {
		return "any"
	}
	names := map[uint8]string{6: "tcp", 17: "udp", 132: "sctp"}
	var out []string
	for _, p := range ps {
		switch {
		case p.Named():
			out = append(out, "named/"+p.Name)
		case p.First == p.Last:
			out = append(out, fmt.Sprintf("%s/%d", names[p.Protocol], p.First))
		default:
			out = append(out, fmt.Sprintf("%s/%d-%d", names[p.Protocol], p.First, p.Last))
		}
	}
	return strings.Join(out, " ")
}
