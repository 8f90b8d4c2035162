package eniconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eniwire/eniwire/controller/subnet"
)

// The two resources the source watches: this node alone, and every ENIConfig (they are cluster-scoped).
var (
	nodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	eniConfigs = schema.GroupVersionResource{Group: "crd.k8s.amazonaws.com", Version: "v1alpha1", Resource: "eniconfigs"}
)

// Config says whose ENIConfig the source finds, and where the Kubernetes API is.
type Config struct {
	// NodeName is this node's name in Kubernetes (the DaemonSet's spec.nodeName).
	NodeName string
	// Label and Annotation are the node's keys that name its ENIConfig (DefaultLabel, DefaultAnnotation);
	// an empty one is not consulted.
	Label, Annotation string
	// Kubeconfig is a kubeconfig file; empty means the in-cluster configuration (the pod's service account).
	Kubeconfig string
	Logger     *slog.Logger
}

// Source is a subnet.ENIConfigSource fed by watches of the node and the ENIConfigs. What it saw last stays
// in the informers' stores while the API server is unreachable, so Current keeps answering.
type Source struct {
	node, configs cache.SharedIndexInformer
	nodeName      string
	keys          keys
	log           *slog.Logger

	mu         sync.Mutex
	errs       map[schema.GroupVersionResource]error // last list or watch error per resource, nil once one succeeds
	lastChoice string                                // the last choice logged
	lastErr    string                                // the last connection state logged
}

var _ subnet.ENIConfigSource = (*Source)(nil)

// New builds the source; Start runs it.
func New(cfg Config) (*Source, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("building the ENIConfig source: the node name is empty (MY_NODE_NAME)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	client, err := NewClient(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	s := &Source{
		nodeName: cfg.NodeName, keys: keys{label: cfg.Label, annotation: cfg.Annotation},
		log: cfg.Logger.With("component", "eniconfig"), errs: map[schema.GroupVersionResource]error{},
	}
	thisNode := fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	s.node = s.informer(client, nodes, func(o *metav1.ListOptions) { o.FieldSelector = thisNode })
	s.configs = s.informer(client, eniConfigs, func(*metav1.ListOptions) {})
	return s, nil
}

// NewClient is the agent's client of the Kubernetes API from kubeconfig (empty: the in-cluster configuration,
// the pod's service account); the node reporter (package nodeready) shares it.
func NewClient(kubeconfig string) (dynamic.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the Kubernetes API configuration: %w", err)
	}
	rc.UserAgent = "eniwire-agent"
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes API client: %w", err)
	}
	return client, nil
}

// informer watches one resource, recording every list and watch outcome for Err and logging every change of
// choice.
func (s *Source) informer(client dynamic.Interface, gvr schema.GroupVersionResource, narrow func(*metav1.ListOptions)) cache.SharedIndexInformer {
	r := client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			l, err := r.List(ctx, o)
			s.record(gvr, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			w, err := r.Watch(ctx, o)
			s.record(gvr, err)
			return w, err
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	changed := func(any) { s.logChange() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, DeleteFunc: changed, UpdateFunc: func(_, n any) { changed(n) },
	})
	return inf
}

// Start runs the watches until ctx ends.
func (s *Source) Start(ctx context.Context) {
	go s.node.Run(ctx.Done())
	go s.configs.Run(ctx.Done())
}

// WaitForSync waits until both watches have listed once, or ctx ends; it says which.
func (s *Source) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.node.HasSynced, s.configs.HasSynced)
}

// Current implements subnet.ENIConfigSource from the informers' stores: the last state seen.
func (s *Source) Current() (subnet.ENIConfig, bool, string) {
	obj, found, _ := s.node.GetStore().GetByKey(s.nodeName)
	switch {
	case !found:
		return subnet.ENIConfig{}, false, s.notYet(fmt.Sprintf("node %s not seen in the Kubernetes API yet", s.nodeName))
	case !s.configs.HasSynced():
		return subnet.ENIConfig{}, false, s.notYet("ENIConfigs not listed yet")
	}
	node := obj.(*unstructured.Unstructured)
	configs := map[string]parsed{}
	for _, o := range s.configs.GetStore().List() {
		p := parse(o.(*unstructured.Unstructured))
		configs[p.config.Name] = p
	}
	return s.keys.choose(node.GetLabels(), node.GetAnnotations(), configs)
}

// notYet is why with the connection's error, if any.
func (s *Source) notYet(why string) string {
	if err := s.Err(); err != nil {
		return why + ": " + err.Error()
	}
	return why
}

// Err implements subnet.ENIConfigSource: the last list or watch error of either resource.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, gvr := range []schema.GroupVersionResource{nodes, eniConfigs} {
		if err := s.errs[gvr]; err != nil {
			errs = append(errs, fmt.Errorf("watching %s: %w", gvr.Resource, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Source) record(gvr schema.GroupVersionResource, err error) {
	s.mu.Lock()
	s.errs[gvr] = err
	s.mu.Unlock()
	s.logChange()
}

// logChange logs the choice and the connection state when they differ from what was logged last.
func (s *Source) logChange() {
	c, ok, why := s.Current()
	choice := fmt.Sprintf("%s %+v", why, c)
	errText := ""
	if err := s.Err(); err != nil {
		errText = err.Error()
	}
	s.mu.Lock()
	choiceChanged, errChanged := choice != s.lastChoice, errText != s.lastErr
	s.lastChoice, s.lastErr = choice, errText
	s.mu.Unlock()
	if choiceChanged {
		s.log.Info("ENIConfig", "applies", ok, "choice", why, "subnet", c.Subnet, "securityGroups", c.SecurityGroups)
	}
	if errChanged && errText != "" {
		s.log.Warn("Kubernetes API unreachable; serving from the last ENIConfig seen", "err", errText)
	} else if errChanged {
		s.log.Info("Kubernetes API reachable again")
	}
}
