package policywatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf/rlimit"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/netpol"
	"github.com/eniwire/eniwire/netpol/netpoltest"
)

// The scale: one agent holding 20,000 pods, 2,000 namespaces and 1,000 policies; its node is one
// of 200 (about 100 pods).
const (
	scaleNamespaces = 2000
	scalePods       = 20000
	scalePolicies   = 1000
	scaleNodes      = 200
	// churnPods is how many pods each kind of churn event touches in a run.
	churnPods = 200
)

// BenchmarkWatcherAtScale runs the agent's NetworkPolicy watch as the agent does (client-go informers with
// their transform, the Compiler, every write into the datapath's policy maps, loaded for real) over a
// fake clientset holding the cluster, the Pods' watch fed in-process. It reports the heap in use after
// sync (after a GC, less the heap before the watch started: the clientset's own copies are not counted),
// the CPU time from start to sync, and the CPU time per pod churn event in steady state (a pod of another
// node added, its labels changed, deleted; pods of production namespaces, which many policies let in, so
// their churn reaches this node's isolated pods), with the writes it caused. The baseline, measured in the
// same run: netpol's Compiler alone, built from the same objects and fed the same events. Not counted:
// the API server's side and decoding its watch stream (the informers here get objects, not bytes).
func BenchmarkWatcherAtScale(b *testing.B) {
	cluster := netpoltest.NewCluster(scaleNamespaces, scalePods, scalePolicies, scaleNodes)
	churn := churnOf(cluster)

	compilerHeap, compilerSync, compilerEvents := compilerAlone(cluster, churn)

	d := openPolicyMaps(b)
	driver := &countingDriver{PolicyDriver: d}
	objs := make([]runtime.Object, 0, len(cluster.Namespaces)+len(cluster.Pods)+len(cluster.Policies))
	for _, n := range cluster.Namespaces {
		objs = append(objs, n)
	}
	for _, p := range cluster.Pods {
		objs = append(objs, p)
	}
	for _, np := range cluster.Policies {
		objs = append(objs, np)
	}
	client := fake.NewClientset(objs...)
	pods := watch.NewFakeWithChanSize(2*churnPods, false)
	client.PrependWatchReactor("pods", k8stesting.DefaultWatchReactor(pods, nil))
	w, err := New(Config{NodeName: netpoltest.Node, Client: client, Driver: driver, Recorder: record.NewFakeRecorder(1000),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}

	heap0 := netpoltest.HeapInUse()
	cpu0 := netpoltest.CPUTime()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	w.waitUntil(b, "the first sync", func() bool { return w.synced })
	syncCPU := netpoltest.CPUTime() - cpu0
	heap := netpoltest.HeapInUse() - heap0
	syncWrites := driver.writes.Load()
	if n := len(w.compiler.Policies()); n == 0 {
		b.Fatal("no pod of the node has a policy: the generated cluster tests nothing")
	}

	// Steady state: each kind of event for every churned pod, then a sentinel pod of this node, whose
	// arrival says every event before it was handled (one informer delivers in order).
	type figures struct {
		cpu, compiler   time.Duration
		writes, entries float64
	}
	perKind := map[string]figures{}
	sentinel := netpoltest.Pod(cluster.Namespaces[2].Name, "sentinel", netpoltest.Node, netpoltest.Labels{"round": "0"}, "10.251.0.1")
	for round := 0; b.Loop(); round++ {
		for i, kind := range churnKinds {
			writes0, entries0 := driver.writes.Load(), driver.entries.Load()
			cpu0 := netpoltest.CPUTime()
			for _, e := range churn[kind.name] {
				kind.send(pods, e)
			}
			s := sentinel.DeepCopy()
			s.Labels["round"] = fmt.Sprint(round*len(churnKinds) + i + 1)
			pods.Modify(s)
			w.waitUntil(b, "the churn's last event", func() bool {
				p := w.local[podKey{s.Namespace, s.Name}]
				return p != nil && p.Labels["round"] == s.Labels["round"]
			})
			perEvent := (netpoltest.CPUTime() - cpu0) / time.Duration(churnPods)
			if round == 0 {
				perKind[kind.name] = figures{perEvent, compilerEvents[kind.name],
					float64(driver.writes.Load()-writes0) / churnPods, float64(driver.entries.Load()-entries0) / churnPods}
			}
		}
	}
	b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
	b.ReportMetric(float64(compilerHeap)/(1<<20), "compiler-MiB")
	b.ReportMetric(syncCPU.Seconds()*1e3, "sync-cpu-ms")
	b.ReportMetric(compilerSync.Seconds()*1e3, "compiler-cpu-ms")
	b.ReportMetric(float64(syncWrites), "sync-writes")
	for name, f := range perKind {
		b.ReportMetric(float64(f.cpu.Nanoseconds())/1e3, name+"-cpu-µs/event")
		b.ReportMetric(float64(f.compiler.Nanoseconds())/1e3, name+"-compiler-cpu-µs/event")
		b.ReportMetric(f.writes, name+"-writes/event")
		b.ReportMetric(f.entries, name+"-peers-written/event")
	}
}

// churnKinds are the pod events of the steady state, in the order they run: each pod is added, relabelled,
// then deleted.
var churnKinds = []struct {
	name string
	send func(*watch.FakeWatcher, runtime.Object)
}{
	{"add", (*watch.FakeWatcher).Add},
	{"label", (*watch.FakeWatcher).Modify},
	{"delete", (*watch.FakeWatcher).Delete},
}

// churnOf is, for each kind of event, the pods it carries: new pods of another node in production
// namespaces, then the same with another app label, then the same deleted.
func churnOf(c *netpoltest.Cluster) map[string][]*corev1.Pod {
	var prod []*corev1.Pod
	for _, p := range c.Pods {
		if c.Namespaces[netpoltest.NamespaceIndex(p.Namespace)].Labels["env"] == "prod" && p.Spec.NodeName != netpoltest.Node {
			prod = append(prod, p)
		}
	}
	out := map[string][]*corev1.Pod{}
	for i := range churnPods {
		p := prod[i%len(prod)].DeepCopy()
		p.Name = fmt.Sprintf("churn-%d", i)
		p.UID = ""
		p.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.250.%d.%d", i/250, 1+i%250)}}
		relabelled := p.DeepCopy()
		relabelled.Labels["app"] = map[string]string{"api": "web"}[p.Labels["app"]]
		if relabelled.Labels["app"] == "" {
			relabelled.Labels["app"] = "api"
		}
		out["add"] = append(out["add"], p)
		out["label"] = append(out["label"], relabelled)
		out["delete"] = append(out["delete"], relabelled)
	}
	return out
}

// compilerAlone is the baseline: the bytes a Compiler holds once built from the cluster, the CPU time of
// the build, and the CPU time per event of each kind of churn.
func compilerAlone(cluster *netpoltest.Cluster, churn map[string][]*corev1.Pod) (uint64, time.Duration, map[string]time.Duration) {
	heap0 := netpoltest.HeapInUse()
	cpu0 := netpoltest.CPUTime()
	c := netpol.NewCompiler(netpoltest.Node)
	c.Hold()
	cluster.FeedTo(c)
	c.Flush()
	build := netpoltest.CPUTime() - cpu0
	heap := netpoltest.HeapInUse() - heap0
	perEvent := map[string]time.Duration{}
	for _, kind := range churnKinds {
		cpu0 := netpoltest.CPUTime()
		for _, p := range churn[kind.name] {
			if kind.name == "delete" {
				c.DeletePod(p.Namespace, p.Name)
			} else {
				c.UpsertPod(p)
			}
		}
		perEvent[kind.name] = (netpoltest.CPUTime() - cpu0) / time.Duration(len(churn[kind.name]))
	}
	return heap, build, perEvent
}

// waitUntil waits, bounded, until cond holds under the Watcher's lock; every handled event and the sync
// wake it.
func (w *Watcher) waitUntil(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.After(5 * time.Minute)
	for {
		w.mu.Lock()
		ok, seen := cond(), w.seen
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-seen:
		case <-deadline:
			b.Fatalf("timed out waiting for %s", what)
		}
	}
}

// countingDriver counts the writes the Watcher makes through the datapath, and the peers they carry.
type countingDriver struct {
	dptypes.PolicyDriver
	writes  atomic.Int64
	entries atomic.Int64 // the peers of the policies written
}

func (d *countingDriver) SetPodPolicy(ctx context.Context, a netip.Addr, p dptypes.PodPolicy) error {
	d.writes.Add(1)
	d.entries.Add(int64(len(p.Ingress) + len(p.Egress)))
	return d.PolicyDriver.SetPodPolicy(ctx, a, p)
}

func (d *countingDriver) ClearPodPolicy(ctx context.Context, a netip.Addr) error {
	d.writes.Add(1)
	return d.PolicyDriver.ClearPodPolicy(ctx, a)
}

// openPolicyMaps loads the datapath's programs and maps, pinned under a bpffs directory of the benchmark's
// own (attached nowhere: the policy maps are what the Watcher writes).
func openPolicyMaps(b *testing.B) *datapath.Datapath {
	b.Helper()
	testenv.RequireRoot(b)
	if err := rlimit.RemoveMemlock(); err != nil {
		b.Fatalf("removing memlock limit: %v", err)
	}
	base := fmt.Sprintf("/sys/fs/bpf/eniwire-policywatch-bench-%d", os.Getpid())
	pinRoot := filepath.Join(base, "v1")
	d, err := datapath.Load(datapath.Config{PinRoot: pinRoot, VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatalf("loading the datapath: %v", err)
	}
	b.Cleanup(func() {
		_ = d.Close()
		_ = datapath.Uninstall(pinRoot)
		_ = os.RemoveAll(base)
	})
	return d
}
