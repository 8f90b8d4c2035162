package podsg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/eniwire/eniwire/controller/kubewatch"
)

// DefaultMaxGroupsPerENI is EC2's default quota of security groups per network interface.
const DefaultMaxGroupsPerENI = 5

// Config says whose pods the Watcher answers for, and from which API server.
type Config struct {
	// NodeName is this node's name in Kubernetes (MY_NODE_NAME).
	NodeName string
	// Client watches Pods and ServiceAccounts and writes Events; Dynamic watches the SecurityGroupPolicies.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// PodWait bounds how long SecurityGroupsOf waits for the first lists, its pod and the pod's service
	// account to be in the watch (default 20 s: the ADD then fails with the reason, before the plugin's own
	// 30 s limit on a call to the agent).
	PodWait time.Duration
	// MaxGroupsPerENI is how many security groups an ENI may carry (default DefaultMaxGroupsPerENI; an
	// account whose quota was raised sets its own).
	MaxGroupsPerENI int
	// Recorder receives the Events on policies and pods (default: one that writes them to the API server
	// as eniwire-agent).
	Recorder record.EventRecorder
	Logger   *slog.Logger
}

// Watcher answers, at a pod's ADD, which security groups the SecurityGroupPolicies give it, and reports
// the running pods whose answer has changed since. Its informers' handlers, the ADDs and the reports all
// take mu.
type Watcher struct {
	cfg      Config
	log      *slog.Logger
	recorder record.EventRecorder
	// nodePods holds this node's Pods alone (a field selector on spec.nodeName); allAccounts every
	// ServiceAccount; policyInf every SecurityGroupPolicy.
	nodePods, allAccounts informers.SharedInformerFactory
	pods                  corelisters.PodLister
	accounts              corelisters.ServiceAccountLister
	policyInf             cache.SharedIndexInformer

	mu sync.Mutex
	// policies are the SecurityGroupPolicies seen, parsed, by namespace and then name.
	policies map[string]map[string]*policy
	// started are the node's running pods and the groups each was given (started.go); refused the ADDs
	// answered ErrTooManyGroups, until the pod starts or goes (report.go).
	started map[podKey]*startedPod
	refused map[podKey]string
	// unavailable are the pods whose set the node could not give an address, and why, as last reported
	// (refused.go); until the pod starts or goes.
	unavailable map[podKey]string
	// synced: the first lists are in. crdAbsent: the last list of SecurityGroupPolicies found no such
	// resource. watchErr is the last list or watch error, nil once one succeeds. seen is closed and replaced
	// at every event, for the ADDs' waits.
	synced, crdAbsent bool
	watchErr          error
	seen              chan struct{}
}

type podKey struct{ namespace, name string }

func (k podKey) String() string { return k.namespace + "/" + k.name }

// New builds the Watcher; Run starts it.
func New(cfg Config) (*Watcher, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("building the SecurityGroupPolicy watch: the node name is empty (MY_NODE_NAME)")
	}
	if cfg.Client == nil || cfg.Dynamic == nil {
		return nil, errors.New("building the SecurityGroupPolicy watch: a Kubernetes client and a dynamic client are required")
	}
	if cfg.PodWait == 0 {
		cfg.PodWait = 20 * time.Second
	}
	if cfg.MaxGroupsPerENI == 0 {
		cfg.MaxGroupsPerENI = DefaultMaxGroupsPerENI
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Watcher{
		cfg: cfg, log: cfg.Logger.With("component", "securitygroups"), recorder: cfg.Recorder,
		policies: map[string]map[string]*policy{}, started: map[podKey]*startedPod{}, refused: map[podKey]string{},
		unavailable: map[podKey]string{},
		seen:        make(chan struct{}),
	}
	thisNode := fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	w.nodePods = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(slim),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = thisNode }))
	w.allAccounts = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(slim))
	w.pods = w.nodePods.Core().V1().Pods().Lister()
	w.accounts = w.allAccounts.Core().V1().ServiceAccounts().Lister()
	w.policyInf = policyInformer(cfg.Dynamic, w.onPolicyListed)
	return w, nil
}

// Run watches until ctx ends. SecurityGroupsOf answers once the first lists are in; without the CRD, the
// list of SecurityGroupPolicies counts as in, and empty.
func (w *Watcher) Run(ctx context.Context) error {
	if w.recorder == nil {
		w.recorder = kubewatch.NewRecorder(ctx, w.cfg.Client, w.cfg.NodeName)
	}
	var regs []cache.InformerSynced
	for _, h := range []struct {
		inf         cache.SharedIndexInformer
		upsert, del func(any)
	}{
		{w.nodePods.Core().V1().Pods().Informer(), w.onPod, w.onPodGone},
		{w.allAccounts.Core().V1().ServiceAccounts().Informer(), w.onAccount, w.onAccount},
		{w.policyInf, w.onPolicy, w.onPolicyGone},
	} {
		_ = h.inf.SetWatchErrorHandlerWithContext(w.onWatchError)
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: h.upsert, UpdateFunc: func(_, n any) { h.upsert(n) }, DeleteFunc: h.del,
		})
		if err != nil {
			return fmt.Errorf("watching for SecurityGroupPolicy: %w", err)
		}
		synced := reg.HasSynced
		if h.inf == w.policyInf {
			// Without the CRD there is no SecurityGroupPolicy to list: the list is in, and empty.
			synced = func() bool { return reg.HasSynced() || w.crdAbsentNow() }
		}
		regs = append(regs, synced)
	}
	w.nodePods.Start(ctx.Done())
	w.allAccounts.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); w.policyInf.Run(ctx.Done()) }()
	defer func() { w.nodePods.Shutdown(); w.allAccounts.Shutdown(); <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), regs...) {
		return ctx.Err()
	}
	w.mu.Lock()
	w.synced = true
	w.recheck(func(podKey, *startedPod) bool { return true })
	w.notify()
	n, absent := w.countPolicies(), w.crdAbsent
	w.mu.Unlock()
	w.log.Info("security groups for pods: watching", "node", w.cfg.NodeName, "policies", n, "crd_absent", absent)
	<-ctx.Done()
	return ctx.Err()
}

// onWatchError records a failed list or watch. NotFound is the SecurityGroupPolicy CRD not installed, which
// onPolicyListed has recorded and logged once: it is no failure, and the reflector's retries are not logged.
func (w *Watcher) onWatchError(_ context.Context, r *cache.Reflector, err error) {
	if apierrors.IsNotFound(err) {
		return
	}
	w.mu.Lock()
	first := w.watchErr == nil
	w.watchErr = err
	w.mu.Unlock()
	if first {
		w.log.Warn("watching the Kubernetes API failed; ADDs are answered from what was seen last", "watch", r.TypeDescription(), "err", err)
	}
	cache.DefaultWatchErrorHandler(context.Background(), r, err)
}

func (w *Watcher) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName != w.cfg.NodeName {
		return
	}
	k := podKey{p.Namespace, p.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErr = nil
	w.reportInvalidTo(p.Namespace)
	w.recheck(func(s podKey, _ *startedPod) bool { return s == k })
	w.notify()
}

// onPodGone forgets a refused ADD of a pod gone from the API. A started pod stays until Stopped: a
// force-deleted pod runs until the runtime's DEL.
func (w *Watcher) onPodGone(obj any) {
	k, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.refused, k)
	delete(w.unavailable, k)
	w.notify()
}

// onAccount rechecks the started pods of the namespace of a ServiceAccount whose labels may have changed (or
// that is gone), and wakes the ADDs that wait for it.
func (w *Watcher) onAccount(obj any) {
	k, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErr = nil
	w.recheck(func(s podKey, _ *startedPod) bool { return s.namespace == k.namespace })
	w.notify()
}

func (w *Watcher) onPolicy(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	p := parse(u)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErr = nil
	ns := w.policies[u.GetNamespace()]
	if ns == nil {
		ns = map[string]*policy{}
		w.policies[u.GetNamespace()] = ns
	}
	old := ns[u.GetName()]
	if old != nil && p.err != nil {
		p.reported = old.reported
	}
	w.logValidity(old, p)
	ns[u.GetName()] = p
	w.reportInvalidTo(u.GetNamespace())
	w.recheck(func(s podKey, _ *startedPod) bool { return s.namespace == u.GetNamespace() })
	w.notify()
}

func (w *Watcher) onPolicyGone(obj any) {
	k, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErr = nil
	delete(w.policies[k.namespace], k.name)
	if len(w.policies[k.namespace]) == 0 {
		delete(w.policies, k.namespace)
	}
	w.recheck(func(s podKey, _ *startedPod) bool { return s.namespace == k.namespace })
	w.notify()
}

// notify wakes the ADDs' waits; mu held.
func (w *Watcher) notify() {
	close(w.seen)
	w.seen = make(chan struct{})
}

// countPolicies is how many SecurityGroupPolicies the watch holds; mu held.
func (w *Watcher) countPolicies() int {
	n := 0
	for _, ns := range w.policies {
		n += len(ns)
	}
	return n
}

func keyOf(obj any) (podKey, bool) {
	namespace, name, ok := kubewatch.Key(obj)
	return podKey{namespace, name}, ok
}
