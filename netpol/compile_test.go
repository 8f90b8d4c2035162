package netpol

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// compileBoth compiles objects with Compile and with a Compiler fed them in order, checks that the two
// agree, and returns the result.
func compileBoth(t *testing.T, objects []any) map[netip.Addr]dptypes.PodPolicy {
	t.Helper()
	cl := newCluster()
	c := NewCompiler(here)
	for _, o := range objects {
		switch o := o.(type) {
		case *corev1.Pod:
			cl.pods[o.Namespace+"/"+o.Name] = o
			c.UpsertPod(o)
		case *corev1.Namespace:
			cl.namespaces[o.Name] = o
			c.UpsertNamespace(o)
		case *networkingv1.NetworkPolicy:
			cl.policies[o.Namespace+"/"+o.Name] = o
			c.UpsertPolicy(o)
		default:
			t.Fatalf("unknown object %T", o)
		}
	}
	want := cl.compile(here)
	if d := diffPolicies(c.Policies(), want); d != "" {
		t.Fatalf("Compiler differs from Compile:\n%s", d)
	}
	return want
}

func objs(os ...any) []any { return os }

func TestCompile(t *testing.T) {
	web := mkPod("shop", "web-1", here, lbl{"app": "web"}, "10.0.0.1")
	db := mkPod("shop", "db-0", here, lbl{"app": "db"}, "10.0.0.2")
	client := mkPod("shop", "client", "node-b", lbl{"app": "client"}, "10.0.1.1")
	otherClient := mkPod("other", "client", "node-b", lbl{"app": "client"}, "10.0.2.1")
	shopNS, otherNS := mkNS("shop", lbl{"team": "shop"}), mkNS("other", lbl{"team": "other"})
	base := func(more ...any) []any { return append(objs(shopNS, otherNS, web, db, client, otherClient), more...) }

	tests := []struct {
		name    string
		objects []any
		pod     string
		want    dptypes.PodPolicy
	}{
		{"a pod no policy selects is not isolated", base(), "10.0.0.1", dptypes.PodPolicy{}},
		{"a policy with no rules denies every ingress flow",
			base(mkPolicy("shop", "deny", nil, nil, nil, nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true}},
		{"policyTypes Egress alone isolates egress only",
			base(mkPolicy("shop", "deny", nil, egressOnly, nil, nil)), "10.0.0.1",
			dptypes.PodPolicy{EgressIsolated: true}},
		{"without policyTypes, egress rules make the policy isolate egress too",
			base(mkPolicy("shop", "p", nil, nil, nil, to(peers(podsWith(lbl{"app": "db"}))))), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, EgressIsolated: true, Egress: entries(entry("10.0.0.2/32", anyProto))}},
		{"policyTypes Ingress ignores the policy's egress rules",
			base(mkPolicy("shop", "p", nil, ingressOnly, nil, to(peers(podsWith(lbl{"app": "db"}))))), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true}},
		{"a policy whose podSelector does not parse isolates every pod of its namespace (fail closed)",
			base(func() *networkingv1.NetworkPolicy {
				np := mkPolicy("shop", "bad", nil, nil, nil, nil)
				np.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
				return np
			}()), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true}},
		{"a peer selector that does not parse matches no pod",
			base(func() *networkingv1.NetworkPolicy {
				bad := podsWith(nil)
				bad.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}
				return mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(bad, podsWith(lbl{"app": "client"}))), nil)
			}()), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.1/32", anyProto))}},
		{"a port of a protocol the datapath does not know allows nothing",
			base(mkPolicy("shop", "p", nil, nil, from(peers(block("10.0.0.0/8")), port("ICMP", 0), port("", 80)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(80, 80)))}},
		{"a namespace whose object is not known yet is picked by its name",
			objs(web, mkPod("ghost", "client", "node-b", nil, "10.0.3.1"),
				mkPolicy("shop", "p", nil, nil, from(peers(nsWith(lbl{corev1.LabelMetadataName: "ghost"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.3.1/32", anyProto))}},
		{"matchExpressions select too (In, DoesNotExist), here web and not the canary",
			base(mkPod("shop", "web-canary", here, lbl{"app": "web", "canary": "yes"}, "10.0.0.9"),
				func() *networkingv1.NetworkPolicy {
					np := mkPolicy("shop", "p", nil, nil, from(peers(podsWith(lbl{"app": "client"}))), nil)
					np.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{
						{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
						{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
					}
					return np
				}()), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.1/32", anyProto))}},
		{"matchExpressions: the canary is not selected",
			base(mkPod("shop", "web-canary", here, lbl{"app": "web", "canary": "yes"}, "10.0.0.9"),
				func() *networkingv1.NetworkPolicy {
					np := mkPolicy("shop", "p", nil, nil, nil, nil)
					np.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{
						{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
					}
					return np
				}()), "10.0.0.9",
			dptypes.PodPolicy{}},
		{"a pod the podSelector does not match is not isolated",
			base(mkPolicy("shop", "p", lbl{"app": "db"}, nil, nil, nil)), "10.0.0.1", dptypes.PodPolicy{}},
		{"a podSelector peer matches pods of the policy's namespace only",
			base(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.1/32", anyProto))}},
		{"a namespaceSelector peer matches every pod of the namespaces it picks",
			base(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(nsWith(lbl{"team": "other"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.2.1/32", anyProto))}},
		{"a namespaceSelector with a podSelector matches their intersection",
			base(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(podsInNS(nil, lbl{"app": "client"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.1/32", anyProto), entry("10.0.2.1/32", anyProto))}},
		{"a namespace is picked by its kubernetes.io/metadata.name label",
			base(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(nsWith(lbl{corev1.LabelMetadataName: "other"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.2.1/32", anyProto))}},
		{"an empty from allows every address of both families",
			base(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(nil, port("", 80)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("0.0.0.0/0", tcp(80, 80)), entry("::/0", tcp(80, 80)))}},
		{"an ipBlock's except is a longer prefix without the rule's ports",
			base(mkPolicy("shop", "p", nil, nil, from(peers(block("10.0.0.0/8", "10.0.1.0/24")), port("", 443)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(443, 443)), entry("10.0.1.0/24"))}},
		{"a peer inside an except keeps the ports of the other rules that cover it",
			base(mkPolicy("shop", "p", nil, nil, append(from(peers(block("10.0.0.0/8", "10.0.1.0/24")), port("", 443)),
				from(peers(podsWith(lbl{"app": "client"})), port(corev1.ProtocolUDP, 53))...), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(443, 443)), entry("10.0.1.0/24"), entry("10.0.1.1/32", udp(53, 53)))}},
		{"overlapping rules fold: the longer prefix holds both rules' ports",
			base(mkPolicy("shop", "p", nil, nil, append(from(peers(block("10.0.0.0/8")), port("", 80)),
				from(peers(block("10.1.0.0/16")), port(corev1.ProtocolUDP, 53))...), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(80, 80)), entry("10.1.0.0/16", tcp(80, 80), udp(53, 53)))}},
		{"a prefix inside another with nothing more to allow is left out",
			base(mkPolicy("shop", "p", nil, nil, append(from(peers(block("10.0.0.0/8")), port("", 80)),
				from(peers(podsWith(lbl{"app": "client"})), port("", 80))...), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(80, 80)))}},
		{"a rule without ports allows every protocol, and absorbs the ports of others on the same peer",
			base(mkPolicy("shop", "p", nil, nil, append(from(peers(podsWith(lbl{"app": "client"}))),
				from(peers(podsWith(lbl{"app": "client"})), port("", 80))...), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.1/32", anyProto))}},
		{"a port without a number allows every port of its protocol",
			base(mkPolicy("shop", "p", nil, nil, from(peers(block("10.0.0.0/8")), protoOnly(corev1.ProtocolUDP)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", udp(0, 65535)))}},
		{"endPort makes a range; TCP is the default protocol; SCTP is its own",
			base(mkPolicy("shop", "p", nil, nil, from(peers(block("10.0.0.0/8")), portRangeOf("", 8000, 8100), port(corev1.ProtocolSCTP, 9000)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(8000, 8100), sctp(9000, 9000)))}},
		{"overlapping and adjacent ranges of one protocol merge",
			base(mkPolicy("shop", "p", nil, nil, from(peers(block("10.0.0.0/8")), portRangeOf("", 80, 90), portRangeOf("", 85, 100), port("", 101), port(corev1.ProtocolUDP, 102)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.0/8", tcp(80, 101), udp(102, 102)))}},
		{"ingress ports by name resolve on the selected pod",
			base(withPorts(mkPod("shop", "api-1", here, lbl{"app": "api"}, "10.0.0.3"), cport("http", 8080, "")),
				mkPolicy("shop", "p", lbl{"app": "api"}, nil, from(peers(block("0.0.0.0/0")), namedPortOf("", "http")), nil)), "10.0.0.3",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("0.0.0.0/0", tcp(8080, 8080)))}},
		{"a port name must match the rule's protocol too",
			base(withPorts(mkPod("shop", "api-1", here, lbl{"app": "api"}, "10.0.0.3"), cport("http", 8080, "")),
				mkPolicy("shop", "p", lbl{"app": "api"}, nil, from(peers(block("0.0.0.0/0")), namedPortOf(corev1.ProtocolUDP, "http")), nil)), "10.0.0.3",
			dptypes.PodPolicy{IngressIsolated: true}},
		{"egress ports by name resolve on each peer pod, at its own address",
			base(withPorts(mkPod("shop", "api-1", "node-b", lbl{"app": "api"}, "10.0.1.3"), cport("http", 8080, "")),
				withPorts(mkPod("shop", "api-2", "node-b", lbl{"app": "api"}, "10.0.1.4"), cport("http", 9090, "")),
				mkPod("shop", "api-3", "node-b", lbl{"app": "api"}, "10.0.1.5"),
				mkPolicy("shop", "p", lbl{"app": "web"}, egressOnly, nil, to(peers(podsWith(lbl{"app": "api"})), namedPortOf("", "http")))), "10.0.0.1",
			dptypes.PodPolicy{EgressIsolated: true, Egress: entries(entry("10.0.1.3/32", tcp(8080, 8080)), entry("10.0.1.4/32", tcp(9090, 9090)))}},
		{"egress ports by name to an ipBlock resolve on the pods inside it, outside its except",
			base(withPorts(mkPod("shop", "api-1", "node-b", lbl{"app": "api"}, "10.0.1.3"), cport("http", 8080, "")),
				withPorts(mkPod("shop", "api-2", "node-b", lbl{"app": "api"}, "10.0.2.4"), cport("http", 9090, "")),
				withPorts(mkPod("shop", "api-3", "node-b", lbl{"app": "api"}, "10.0.1.9"), cport("http", 7070, "")),
				mkPolicy("shop", "p", lbl{"app": "web"}, egressOnly, nil, to(peers(block("10.0.1.0/24", "10.0.1.8/29")), namedPortOf("", "http"), port("", 22)))), "10.0.0.1",
			dptypes.PodPolicy{EgressIsolated: true, Egress: entries(entry("10.0.1.0/24", tcp(22, 22)), entry("10.0.1.3/32", tcp(22, 22), tcp(8080, 8080)), entry("10.0.1.8/29"))}},
		{"egress ports by name to every peer resolve on every pod with that name",
			base(withPorts(mkPod("other", "api-1", "node-b", lbl{"app": "api"}, "10.0.2.3"), cport("dns", 5353, corev1.ProtocolUDP)),
				mkPolicy("shop", "p", lbl{"app": "web"}, egressOnly, nil, to(nil, namedPortOf(corev1.ProtocolUDP, "dns")))), "10.0.0.1",
			dptypes.PodPolicy{EgressIsolated: true, Egress: entries(entry("10.0.2.3/32", udp(5353, 5353)))}},
		{"the policies that select a pod add up",
			base(mkPolicy("shop", "a", lbl{"app": "web"}, ingressOnly, from(peers(podsWith(lbl{"app": "client"})), port("", 80)), nil),
				mkPolicy("shop", "b", nil, egressOnly, nil, nil),
				mkPolicy("shop", "c", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"})), port(corev1.ProtocolUDP, 53)), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, EgressIsolated: true, Ingress: entries(entry("10.0.1.1/32", tcp(80, 80), udp(53, 53)))}},
		{"a policy of another namespace does not select the pod",
			base(mkPolicy("other", "deny", nil, nil, nil, nil)), "10.0.0.1", dptypes.PodPolicy{}},
		{"the rules of a policy for other pods do not leak into this pod's",
			base(mkPolicy("shop", "web", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"})), port("", 80)), nil),
				mkPolicy("shop", "db", lbl{"app": "db"}, nil, from(peers(podsWith(lbl{"app": "web"})), port("", 5432)), nil)), "10.0.0.2",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.0.1/32", tcp(5432, 5432)))}},
		{"a dual-stack peer is allowed at both its addresses",
			base(mkPod("shop", "v6", "node-b", lbl{"app": "client6"}, "10.0.1.7", "fd00::7"),
				mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client6"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.7/32", anyProto), entry("fd00::7/128", anyProto))}},
		{"an IPv6 pod is keyed by its IPv6 address",
			base(mkPod("shop", "v6", here, lbl{"app": "web"}, "fd00::9"),
				mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(block("fd00::/64", "fd00::/120"))), nil)), "fd00::9",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("fd00::/64", anyProto), entry("fd00::/120"))}},
		{"host-network and finished pods are no peers",
			base(func() *corev1.Pod {
				p := mkPod("shop", "host", "node-b", lbl{"app": "client"}, "192.168.0.10")
				p.Spec.HostNetwork = true
				return p
			}(), func() *corev1.Pod {
				p := mkPod("shop", "done", "node-b", lbl{"app": "client"}, "10.0.1.99")
				p.Status.Phase = corev1.PodSucceeded
				return p
			}(), mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"}))), nil)), "10.0.0.1",
			dptypes.PodPolicy{IngressIsolated: true, Ingress: entries(entry("10.0.1.1/32", anyProto))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := compileBoth(t, tt.objects)[netip.MustParseAddr(tt.pod)]
			if !ok {
				t.Fatalf("no state for pod %s", tt.pod)
			}
			if !equalPolicies(got, tt.want) {
				t.Errorf("got  %s\nwant %s", show(got), show(tt.want))
			}
		})
	}
}

func show(p dptypes.PodPolicy) string {
	return fmt.Sprintf("{in:%v out:%v ingress:%v egress:%v}", p.IngressIsolated, p.EgressIsolated, p.Ingress, p.Egress)
}
