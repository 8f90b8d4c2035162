package netpol

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

func TestCompileKeysTheNodesPodsByAddress(t *testing.T) {
	hostPod := mkPod("shop", "host", here, nil, "192.168.0.10")
	hostPod.Spec.HostNetwork = true
	stale := mkPod("shop", "old", here, lbl{"app": "old"}, "10.0.0.5")
	stale.CreationTimestamp = metav1.Unix(100, 0)
	successor := mkPod("shop", "new", here, lbl{"app": "new"}, "10.0.0.5")
	successor.CreationTimestamp = metav1.Unix(200, 0)
	got := compileBoth(t, objs(
		mkPod("shop", "dual", here, nil, "10.0.0.1", "fd00::1"),
		mkPod("shop", "elsewhere", "node-b", nil, "10.0.0.2"),
		mkPod("shop", "pending", here, nil),
		hostPod, stale, successor,
		mkPolicy("shop", "p", lbl{"app": "new"}, nil, nil, nil),
	))
	want := []string{"10.0.0.1", "10.0.0.5", "fd00::1"}
	var keys []string
	for a := range got {
		keys = append(keys, a.String())
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Fatalf("addresses %v, want %v (this node's pods with addresses of their own)", keys, want)
	}
	if !got[netip.MustParseAddr("10.0.0.5")].IngressIsolated {
		t.Errorf("10.0.0.5 has the stale pod's state, not its newer successor's (isolated)")
	}
	if !equalPolicies(got[netip.MustParseAddr("10.0.0.1")], got[netip.MustParseAddr("fd00::1")]) {
		t.Errorf("a dual-stack pod's two addresses have different states")
	}
}

// The AWS agent's bugs, as cases.
func TestCompileAvoidsTheAWSAgentsBugs(t *testing.T) {
	t.Run("pods whose names differ only after the last dash have their own state", func(t *testing.T) {
		got := compileBoth(t, objs(
			mkPod("shop", "web-7d9f8c-abcde", here, lbl{"app": "web", "canary": "yes"}, "10.0.0.1"),
			mkPod("shop", "web-7d9f8c-fghij", here, lbl{"app": "web"}, "10.0.0.2"),
			mkPolicy("shop", "canary", lbl{"canary": "yes"}, nil, from(peers(block("10.9.0.0/16")), port("", 80)), nil),
		))
		a, b := got[netip.MustParseAddr("10.0.0.1")], got[netip.MustParseAddr("10.0.0.2")]
		if !a.IngressIsolated || len(a.Ingress) != 1 {
			t.Errorf("the canary pod: %s, want isolated with one entry", show(a))
		}
		if b.Isolated() || len(b.Ingress) != 0 {
			t.Errorf("its sibling: %s, want not isolated", show(b))
		}
	})
	t.Run("one CIDR holds 100 port/protocol combinations", func(t *testing.T) {
		var ports []networkingPort
		var want []dptypes.PortRange
		for i := range 100 {
			n := uint16(1000 + 2*i) // not adjacent: each stays its own range
			proto := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}[i%2]
			ports = append(ports, port(proto, int32(n)))
			want = append(want, portRange(map[corev1.Protocol]uint8{corev1.ProtocolTCP: 6, corev1.ProtocolUDP: 17}[proto], n, n))
		}
		np := mkPolicy("shop", "many", nil, nil, from(peers(block("10.9.0.0/16"))), nil)
		for _, p := range ports {
			np.Spec.Ingress[0].Ports = append(np.Spec.Ingress[0].Ports, p)
		}
		got := compileBoth(t, objs(mkPod("shop", "web", here, nil, "10.0.0.1"), np))[netip.MustParseAddr("10.0.0.1")]
		if len(got.Ingress) != 1 || len(got.Ingress[0].Ports) != 100 {
			t.Fatalf("got %s, want one entry with 100 ranges", show(got))
		}
		if !slices.Equal(got.Ingress[0].Ports, normalisePorts(want)) {
			t.Errorf("ranges %v, want %v", got.Ingress[0].Ports, want)
		}
	})
	t.Run("a policy's rules for different pods never leak into each other", func(t *testing.T) {
		got := compileBoth(t, objs(
			mkPod("shop", "web", here, lbl{"app": "web"}, "10.0.0.1"),
			mkPod("shop", "db", here, lbl{"app": "db"}, "10.0.0.2"),
			mkPod("shop", "api", here, lbl{"app": "api"}, "10.0.0.3"),
			mkPolicy("shop", "web", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "api"})), port("", 80)), nil),
			mkPolicy("shop", "db", lbl{"app": "db"}, nil, from(peers(podsWith(lbl{"app": "web"})), port("", 5432)), nil),
		))
		for addr, want := range map[string]dptypes.PodPolicy{
			"10.0.0.1": {IngressIsolated: true, Ingress: entries(entry("10.0.0.3/32", tcp(80, 80)))},
			"10.0.0.2": {IngressIsolated: true, Ingress: entries(entry("10.0.0.1/32", tcp(5432, 5432)))},
			"10.0.0.3": {},
		} {
			if g := got[netip.MustParseAddr(addr)]; !equalPolicies(g, want) {
				t.Errorf("%s: got %s, want %s", addr, show(g), show(want))
			}
		}
	})
}

// TestCompilerReportsWhatChanged follows one cluster through events and checks the addresses each event
// reports: only the node's pods whose state changed.
func TestCompilerReportsWhatChanged(t *testing.T) {
	c := NewCompiler(here)
	web := mkPod("shop", "web", here, lbl{"app": "web"}, "10.0.0.1")
	db := mkPod("shop", "db", here, lbl{"app": "db"}, "10.0.0.2", "fd00::2")
	client := mkPod("shop", "client", "node-b", lbl{"app": "client"}, "10.0.1.1")
	relabelled := client.DeepCopy()
	relabelled.Labels["version"] = "2"
	statusOnly := web.DeepCopy()
	statusOnly.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	steps := []struct {
		name  string
		event func() []netip.Addr
		want  []string
	}{
		{"a new pod of the node appears, not isolated", func() []netip.Addr { return c.UpsertPod(web) }, []string{"10.0.0.1"}},
		{"a dual-stack pod appears at both addresses", func() []netip.Addr { return c.UpsertPod(db) }, []string{"10.0.0.2", "fd00::2"}},
		{"a pod of another node changes no state yet", func() []netip.Addr { return c.UpsertPod(client) }, nil},
		{"a policy selecting web", func() []netip.Addr {
			return c.UpsertPolicy(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"}))), nil))
		}, []string{"10.0.0.1"}},
		{"the same policy again changes nothing", func() []netip.Addr {
			return c.UpsertPolicy(mkPolicy("shop", "p", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"}))), nil))
		}, nil},
		{"a status-only update of web changes nothing", func() []netip.Addr { return c.UpsertPod(statusOnly) }, nil},
		{"a label the policy does not read changes nothing", func() []netip.Addr { return c.UpsertPod(relabelled) }, nil},
		{"a second client is a new peer of web", func() []netip.Addr {
			return c.UpsertPod(mkPod("shop", "client-2", "node-b", lbl{"app": "client"}, "10.0.1.2"))
		}, []string{"10.0.0.1"}},
		{"the client goes", func() []netip.Addr { return c.DeletePod("shop", "client") }, []string{"10.0.0.1"}},
		{"the policy goes", func() []netip.Addr { return c.DeletePolicy("shop", "p") }, []string{"10.0.0.1"}},
		{"db goes", func() []netip.Addr { return c.DeletePod("shop", "db") }, []string{"10.0.0.2", "fd00::2"}},
	}
	for i, s := range steps {
		var got []string
		for _, a := range s.event() {
			got = append(got, a.String())
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d, %s: reported %v, want %v", i, s.name, got, s.want)
		}
	}
	if _, ok := c.Policy(netip.MustParseAddr("10.0.0.2")); ok {
		t.Errorf("a deleted pod's address still has state")
	}
	if p, ok := c.Policy(netip.MustParseAddr("10.0.0.1")); !ok || p.Isolated() {
		t.Errorf("web: %v %s, want present and not isolated", ok, show(p))
	}
}

// TestCompilerRecompilesOnlyWhatAnEventReaches counts the node's pods each event recompiles: the work of
// an event is proportional to what it touches, not to the cluster.
func TestCompilerRecompilesOnlyWhatAnEventReaches(t *testing.T) {
	c := NewCompiler(here)
	c.Hold()
	for _, o := range objs(
		mkNS("shop", nil), mkNS("quiet", nil),
		mkPod("shop", "web-1", here, lbl{"app": "web"}, "10.0.0.1"),
		mkPod("shop", "web-2", here, lbl{"app": "web"}, "10.0.0.2"),
		mkPod("shop", "db", here, lbl{"app": "db"}, "10.0.0.3"),
		mkPod("quiet", "batch", here, lbl{"app": "batch"}, "10.0.0.4"),
		mkPolicy("shop", "web", lbl{"app": "web"}, nil, from(peers(podsWith(lbl{"app": "client"}))), nil),
		mkPolicy("shop", "db", lbl{"app": "db"}, nil, from(peers(nsWith(lbl{"team": "data"}))), nil),
	) {
		switch o := o.(type) {
		case *corev1.Pod:
			c.UpsertPod(o)
		case *corev1.Namespace:
			c.UpsertNamespace(o)
		default:
			c.UpsertPolicy(o.(*networkingPolicy))
		}
	}
	if c.Flush(); c.recompiles != 4 {
		t.Fatalf("the initial lists under Hold recompiled %d pods, want each of the node's 4 once", c.recompiles)
	}
	steps := []struct {
		name  string
		event func()
		want  int
	}{
		{"a pod in a namespace no policy reads", func() { c.UpsertPod(mkPod("quiet", "batch-2", "node-b", lbl{"app": "client"}, "10.0.1.9")) }, 0},
		{"a peer of the web policy: its two pods", func() { c.UpsertPod(mkPod("shop", "client", "node-b", lbl{"app": "client"}, "10.0.1.1")) }, 2},
		{"a namespace the db policy now picks: db", func() { c.UpsertNamespace(mkNS("quiet", lbl{"team": "data"})) }, 1},
		{"a new pod of the node in a namespace db allows: itself and db", func() { c.UpsertPod(mkPod("quiet", "batch-3", here, nil, "10.0.0.5")) }, 2},
		{"a policy in the quiet namespace: its one selected pod", func() {
			c.UpsertPolicy(mkPolicy("quiet", "deny", lbl{"app": "batch"}, nil, nil, nil))
		}, 1},
	}
	for _, s := range steps {
		before := c.recompiles
		s.event()
		if got := c.recompiles - before; got != s.want {
			t.Errorf("%s: recompiled %d pods, want %d", s.name, got, s.want)
		}
	}
	if got, want := c.Selecting(netip.MustParseAddr("10.0.0.4")), []string{"quiet/deny"}; !slices.Equal(got, want) {
		t.Errorf("Selecting(10.0.0.4) = %v, want %v", got, want)
	}
}
