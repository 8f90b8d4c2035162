package netpol

import (
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol/netpoltest"
)

// The scale: one agent holding 20,000 pods, 2,000 namespaces and 1,000 policies; the node is one
// of 200 (100 pods).
const (
	benchNamespaces = 2000
	benchPods       = 20000
	benchPolicies   = 1000
	benchNodes      = 200
)

// compileBaseline runs Compile over the cluster three times and returns its result and its least CPU
// time: the baseline, what a compiler without indexes spends on every event.
func compileBaseline(s *netpoltest.Cluster) (map[netip.Addr]dptypes.PodPolicy, time.Duration) {
	var out map[netip.Addr]dptypes.PodPolicy
	least := time.Duration(math.MaxInt64)
	for range 3 {
		cpu0 := netpoltest.CPUTime()
		out = Compile(netpoltest.Node, s.Policies, s.Namespaces, s.Pods)
		least = min(least, netpoltest.CPUTime()-cpu0)
	}
	return out, least
}

// BenchmarkCompilerBuild builds a Compiler from the whole cluster (the agent's start: informers' initial
// lists) and reports the bytes it holds and its CPU time; the baseline is Compile's run over the same
// objects.
func BenchmarkCompilerBuild(b *testing.B) {
	s := netpoltest.NewCluster(benchNamespaces, benchPods, benchPolicies, benchNodes)
	cpu0 := netpoltest.CPUTime()
	for b.Loop() {
		build(s, netpoltest.Node)
	}
	cpu := (netpoltest.CPUTime() - cpu0) / time.Duration(b.N)
	before := netpoltest.HeapInUse()
	c := build(s, netpoltest.Node)
	held := netpoltest.HeapInUse() - before
	ref, refCPU := compileBaseline(s)
	if d := diffPolicies(c.Policies(), ref); d != "" {
		b.Fatalf("the Compiler differs from Compile")
	}
	entries, isolated := 0, 0
	for _, p := range ref {
		entries += len(p.Ingress) + len(p.Egress)
		if p.Isolated() {
			isolated++
		}
	}
	if isolated == 0 {
		b.Fatalf("no pod of the node is isolated: the generated cluster tests nothing")
	}
	runtime.KeepAlive(c)
	b.ReportMetric(float64(held)/(1<<20), "MiB-held")
	b.ReportMetric(cpu.Seconds()*1e3, "cpu-ms/build")
	b.ReportMetric(refCPU.Seconds()*1e3, "Compile-cpu-ms")
	b.ReportMetric(float64(len(ref)), "node-addrs")
	b.ReportMetric(float64(isolated), "isolated")
	b.ReportMetric(float64(entries), "entries")
}

// BenchmarkCompilerPodChurn measures one pod event (an add or a delete, alternately) on a Compiler holding
// the whole cluster: for a pod of another node (the common case) and for a pod of this node. The baseline
// is a full recompile with Compile, what a compiler without indexes does per event.
func BenchmarkCompilerPodChurn(b *testing.B) {
	s := netpoltest.NewCluster(benchNamespaces, benchPods, benchPolicies, benchNodes)
	c := build(s, netpoltest.Node)
	_, refCPU := compileBaseline(s)
	// Templates of the churned pods: any pod of the cluster, or only pods of the production namespaces,
	// which many policies of the mix allow in (so their churn reaches this node's isolated pods).
	anyPod := func(i int) *corev1.Pod { return s.Pods[2+(i*7919)%(len(s.Pods)-2)] }
	var prod []*corev1.Pod
	for _, p := range s.Pods {
		if len(prod) < 64 && s.Namespaces[netpoltest.NamespaceIndex(p.Namespace)].Labels["env"] == "prod" {
			prod = append(prod, p)
		}
	}
	prodPod := func(i int) *corev1.Pod { return prod[i] }
	for _, where := range []struct {
		name     string
		node     string
		template func(int) *corev1.Pod
	}{
		{"another node's pod", "node-7", anyPod},
		{"another node's pod in a production namespace", "node-7", prodPod},
		{"this node's pod", netpoltest.Node, anyPod},
	} {
		b.Run(where.name, func(b *testing.B) {
			// New pods in turn, each then deleted: every event is a real change.
			var pods []*podTemplate
			for i := range 64 {
				src := where.template(i).DeepCopy()
				src.Name = fmt.Sprintf("churn-%d", i)
				src.Spec.NodeName = where.node
				src.Status.PodIPs[0].IP = fmt.Sprintf("10.250.0.%d", i+1)
				pods = append(pods, &podTemplate{src})
			}
			changed, events, recompiles := 0, 0, c.recompiles
			var walls []time.Duration
			cpu0 := netpoltest.CPUTime()
			for i := 0; b.Loop(); i++ {
				p := pods[(i/2)%len(pods)].pod
				start := time.Now()
				if i%2 == 0 {
					changed += len(c.UpsertPod(p))
				} else {
					changed += len(c.DeletePod(p.Namespace, p.Name))
				}
				walls = append(walls, time.Since(start))
				events++
			}
			cpu := (netpoltest.CPUTime() - cpu0) / time.Duration(events)
			slices.Sort(walls)
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3, "cpu-µs/event")
			b.ReportMetric(float64(walls[len(walls)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(walls[len(walls)*99/100].Nanoseconds())/1e3, "p99-µs")
			b.ReportMetric(float64(c.recompiles-recompiles)/float64(events), "recompiled/event")
			b.ReportMetric(float64(changed)/float64(events), "changed/event")
			b.ReportMetric(refCPU.Seconds()*1e3, "Compile-cpu-ms")
			b.ReportMetric(refCPU.Seconds()/cpu.Seconds(), "Compile/event-x")
		})
	}
}

type podTemplate struct{ pod *corev1.Pod }
