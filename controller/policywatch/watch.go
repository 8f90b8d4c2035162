package policywatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/eniwire/eniwire/controller/kubewatch"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol"
)

// Config says whose pods the Watcher enforces, from which API server, through which datapath.
type Config struct {
	// NodeName is this node's name in Kubernetes (MY_NODE_NAME).
	NodeName string
	Client   kubernetes.Interface
	Driver   dptypes.PolicyDriver
	// PodWait bounds how long an ADD waits for its pod to appear in the watch (default 20 s: the ADD then
	// fails with the reason, before the plugin's own 30 s limit on a call to the agent).
	PodWait time.Duration
	// Recorder receives the Events on policies that could not be enforced (default: one that writes them
	// to the API server as eniwire-agent).
	Recorder   record.EventRecorder
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Watcher keeps the node's pods' NetworkPolicy state in the datapath as the watched objects change. Its
// informers' handlers, the ADDs' gate and the reports all take mu: the Compiler is fed by one at a time,
// and each driver write happens under it, in the order the Compiler decided.
type Watcher struct {
	cfg      Config
	log      *slog.Logger
	factory  informers.SharedInformerFactory
	metrics  *metrics
	recorder record.EventRecorder

	mu       sync.Mutex
	compiler *netpol.Compiler
	// local are the node's pods as the handlers last saw them; assigned the addresses ADDs gave pods whose
	// status.podIPs is still empty (gate.go).
	local    map[podKey]*corev1.Pod
	assigned map[podKey]assignment
	// failed are the addresses whose state could not be written, with the error (failures.go).
	failed map[netip.Addr]failure
	// synced: the first lists are compiled and written. seen is closed and replaced at every pod event and
	// at sync, for the gate's waits. watchErr is the last list or watch error, nil once one succeeds.
	synced   bool
	seen     chan struct{}
	watchErr error
	ctx      context.Context
}

type podKey struct{ namespace, name string }

// New builds the Watcher; Run starts it.
func New(cfg Config) (*Watcher, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("building the NetworkPolicy watch: the node name is empty (MY_NODE_NAME)")
	}
	if cfg.Client == nil || cfg.Driver == nil {
		return nil, errors.New("building the NetworkPolicy watch: a Kubernetes client and a policy driver are required")
	}
	if cfg.PodWait == 0 {
		cfg.PodWait = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	w := &Watcher{
		cfg: cfg, log: cfg.Logger.With("component", "networkpolicy"), compiler: netpol.NewCompiler(cfg.NodeName),
		local: map[podKey]*corev1.Pod{}, assigned: map[podKey]assignment{}, failed: map[netip.Addr]failure{},
		seen: make(chan struct{}), recorder: cfg.Recorder, ctx: context.Background(),
	}
	var err error
	if w.metrics, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	w.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(slim))
	return w, nil
}

// Run watches until ctx ends. The first lists are compiled in one batch once all three are in; until then
// the maps keep what an earlier agent wrote.
func (w *Watcher) Run(ctx context.Context) error {
	if w.recorder == nil {
		w.recorder = kubewatch.NewRecorder(ctx, w.cfg.Client, w.cfg.NodeName)
	}
	w.mu.Lock()
	w.ctx = ctx
	w.compiler.Hold()
	w.mu.Unlock()

	pods := w.factory.Core().V1().Pods().Informer()
	namespaces := w.factory.Core().V1().Namespaces().Informer()
	policies := w.factory.Networking().V1().NetworkPolicies().Informer()
	var regs []cache.InformerSynced
	for _, h := range []struct {
		inf    cache.SharedIndexInformer
		upsert func(any)
		del    func(any)
	}{
		{pods, w.onPod, w.onPodGone},
		{namespaces, w.onNamespace, w.onNamespaceGone},
		{policies, w.onPolicy, w.onPolicyGone},
	} {
		_ = h.inf.SetWatchErrorHandlerWithContext(w.onWatchError)
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: h.upsert, UpdateFunc: func(_, n any) { h.upsert(n) }, DeleteFunc: h.del,
		})
		if err != nil {
			return fmt.Errorf("watching for NetworkPolicy: %w", err)
		}
		regs = append(regs, reg.HasSynced)
	}
	w.factory.Start(ctx.Done())
	defer w.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), regs...) {
		return ctx.Err()
	}
	w.mu.Lock()
	w.watchErr = nil
	changed := w.compiler.Flush()
	w.apply(changed)
	w.synced = true
	w.notify()
	n := len(w.compiler.Policies())
	w.mu.Unlock()
	w.log.Info("network policy enforced", "node", w.cfg.NodeName, "pod_addresses", n, "written", len(changed))
	<-ctx.Done()
	return ctx.Err()
}

func (w *Watcher) onWatchError(_ context.Context, r *cache.Reflector, err error) {
	w.mu.Lock()
	first := w.watchErr == nil
	w.watchErr = err
	w.mu.Unlock()
	if first {
		w.log.Warn("Kubernetes API unreachable; the pods keep the policy last written", "watch", r.TypeDescription(), "err", err)
	}
	cache.DefaultWatchErrorHandler(context.Background(), r, err)
}

func (w *Watcher) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErr = nil
	k := podKey{p.Namespace, p.Name}
	if p.Spec.NodeName == w.cfg.NodeName {
		w.local[k] = p
	}
	w.apply(w.compiler.UpsertPod(w.withAssigned(k, p)))
	w.notify()
}

func (w *Watcher) onPodGone(obj any) {
	k, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A pod gone from the API may still run: a force-deleted pod's sandbox lives until the runtime's DEL. The
	// state last written at the pod's own addresses stays until then; the DEL's teardown clears it (the
	// datapath's PodDown), and the next pod at an address gets its own with its ADD (BeforePodUp). What the
	// delete changes for other pods (peers) is written at once.
	var own []netip.Addr
	if p, ok := w.local[k]; ok {
		own = addrsOf(w.withAssigned(k, p))
	}
	delete(w.local, k)
	delete(w.assigned, k)
	changed := slices.DeleteFunc(w.compiler.DeletePod(k.namespace, k.name), func(a netip.Addr) bool { return slices.Contains(own, a) })
	w.apply(changed)
	w.notify()
}

func (w *Watcher) onNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		w.feed(func(c *netpol.Compiler) []netip.Addr { return c.UpsertNamespace(ns) })
	}
}

func (w *Watcher) onNamespaceGone(obj any) {
	if k, ok := keyOf(obj); ok {
		w.feed(func(c *netpol.Compiler) []netip.Addr { return c.DeleteNamespace(k.name) })
	}
}

func (w *Watcher) onPolicy(obj any) {
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		w.feed(func(c *netpol.Compiler) []netip.Addr { return c.UpsertPolicy(np) })
	}
}

func (w *Watcher) onPolicyGone(obj any) {
	if k, ok := keyOf(obj); ok {
		w.feed(func(c *netpol.Compiler) []netip.Addr { return c.DeletePolicy(k.namespace, k.name) })
	}
}

// feed gives the Compiler one event of the watch, which reached the API server, and writes what it changed.
func (w *Watcher) feed(event func(*netpol.Compiler) []netip.Addr) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErr = nil
	w.apply(event(w.compiler))
}

// notify wakes the gate's waits; mu held.
func (w *Watcher) notify() {
	close(w.seen)
	w.seen = make(chan struct{})
}

// apply writes the state of each address the Compiler changed; mu held.
func (w *Watcher) apply(changed []netip.Addr) {
	for _, a := range changed {
		p, ok := w.compiler.Policy(a)
		var err error
		if ok {
			err = w.cfg.Driver.SetPodPolicy(w.ctx, a, p)
		} else {
			err = w.cfg.Driver.ClearPodPolicy(w.ctx, a)
		}
		w.written(a, ok, err)
	}
}

// NewClient is a Kubernetes client from a kubeconfig file, or the pod's in-cluster configuration when
// kubeconfig is "".
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the Kubernetes API configuration: %w", err)
	}
	rc.UserAgent = "eniwire-agent"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes API client: %w", err)
	}
	return client, nil
}

func keyOf(obj any) (podKey, bool) {
	namespace, name, ok := kubewatch.Key(obj)
	return podKey{namespace, name}, ok
}
