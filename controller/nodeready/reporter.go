package nodeready

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/eniwire/eniwire/controller/api"
)

// Config says whose Node the reporter keeps, through which client, and where the agent's status comes from.
type Config struct {
	// Nodes is the Kubernetes API's nodes (DynamicNodes).
	Nodes Nodes
	// NodeName is this node's name (the DaemonSet's spec.nodeName, MY_NODE_NAME).
	NodeName string
	// Status is the agent's status (controller.Node.Status); it must not block.
	Status func() *api.Status
	// Interval is how often the status is read (default 2 s); the API is written only when the verdict changes.
	Interval time.Duration
	Logger   *slog.Logger
}

const (
	// settle is how long a write is trusted before the watch shows it: the same write is not repeated sooner.
	settle = 30 * time.Second
	// messageEvery spaces writes that change the message alone (a backoff's end time): at most one a minute.
	messageEvery = time.Minute
	// backoffFloor and backoffCeiling bound the wait after a failed write while the API server does not answer.
	backoffFloor, backoffCeiling = time.Second, time.Minute
)

// Reporter keeps the condition and removes the taint. It watches this Node alone, compares what it shows with
// the verdict every Interval, and writes only a difference: a changed verdict, a condition gone (the Node was
// registered again), the taint still there once the pool holds IPs. Failed writes back off; the pool and the
// ADDs never wait on it. Who may touch it: Run's goroutine only.
type Reporter struct {
	cfg  Config
	log  *slog.Logger
	node cache.SharedIndexInformer

	written     Verdict   // the last verdict written
	writtenAt   time.Time // when; zero before the first write
	untaintedAt time.Time // when the taint was last removed
	retryAt     time.Time // no write before this after a failure
	backoff     time.Duration
}

// New builds the reporter; Run runs it.
func New(cfg Config) (*Reporter, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("building the node reporter: the node name is empty (MY_NODE_NAME)")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	thisNode := fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = thisNode
			return cfg.Nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = thisNode
			return cfg.Nodes.Watch(ctx, o)
		},
	}
	return &Reporter{cfg: cfg, log: cfg.Logger.With("component", "nodeready", "node", cfg.NodeName),
		node: cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})}, nil
}

// Run keeps the Node until ctx ends.
func (r *Reporter) Run(ctx context.Context) error {
	go r.node.Run(ctx.Done())
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		r.sync(ctx, time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// sync compares the Node as last seen with the agent's status at now and writes what differs.
func (r *Reporter) sync(ctx context.Context, now time.Time) {
	if now.Before(r.retryAt) {
		return
	}
	obj, found, _ := r.node.GetStore().GetByKey(r.cfg.NodeName)
	if !found {
		return // not listed yet, or the API server does not answer: the informer retries
	}
	node := obj.(*corev1.Node)
	st := r.cfg.Status()
	want := Judge(st)
	err := r.keepCondition(ctx, node, want, now)
	if err == nil && hasTaint(node) && HoldsIPs(st) && now.Sub(r.untaintedAt) >= settle {
		if err = r.removeTaint(ctx, node); err == nil {
			r.untaintedAt = now
			r.log.Info("startup taint removed: the datapath is loaded and the pool holds IPs", "taint", TaintKey)
		}
	}
	if err != nil {
		r.backoff = min(max(2*r.backoff, backoffFloor), backoffCeiling)
		r.retryAt = now.Add(r.backoff)
		r.log.Warn("updating the node", "error", err, "retryIn", r.backoff)
		return
	}
	r.backoff = 0
}

// keepCondition writes want as the condition unless the Node shows it, or the same was written lately (the
// watch has not shown it yet), or only the message changed within messageEvery of the last write.
func (r *Reporter) keepCondition(ctx context.Context, node *corev1.Node, want Verdict, now time.Time) error {
	prev := findCondition(node)
	switch {
	case want.shows(prev):
		return nil
	case want == r.written && now.Sub(r.writtenAt) < settle:
		return nil
	case prev != nil && (prev.Status == corev1.ConditionTrue) == want.Ready && prev.Reason == want.Reason &&
		now.Sub(r.writtenAt) < messageEvery:
		return nil
	}
	c := want.condition(prev, metav1.NewTime(now))
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		return err
	}
	if _, err := r.cfg.Nodes.Patch(ctx, r.cfg.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("writing the %s condition: %w", ConditionType, err)
	}
	if prev == nil || (prev.Status == corev1.ConditionTrue) != want.Ready || prev.Reason != want.Reason {
		r.log.Info("node condition", "type", ConditionType, "status", c.Status, "reason", want.Reason, "message", want.Message)
	}
	r.written, r.writtenAt = want, now
	return nil
}

// removeTaint removes the startup taint from node, as long as its taints are still those seen (a JSON patch
// that tests them first: another writer's change in between fails it, and the next round sees theirs).
func (r *Reporter) removeTaint(ctx context.Context, node *corev1.Node) error {
	kept := []corev1.Taint{}
	for _, t := range node.Spec.Taints {
		if t.Key != TaintKey {
			kept = append(kept, t)
		}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/taints", "value": node.Spec.Taints},
		{"op": "replace", "path": "/spec/taints", "value": kept},
	})
	if err != nil {
		return err
	}
	if _, err := r.cfg.Nodes.Patch(ctx, r.cfg.NodeName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("removing the taint %s: %w", TaintKey, err)
	}
	return nil
}

// findCondition is node's eniwire.io/IPAMReady condition, or nil.
func findCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == ConditionType {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// hasTaint reports whether node carries the startup taint.
func hasTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == TaintKey {
			return true
		}
	}
	return false
}
