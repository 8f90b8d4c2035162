package policywatch

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// ReasonNotEnforceable is the reason of the Warning Event on a policy whose pod's state could not be
// written: the pod is isolated and allows nothing until a change makes its state fit.
const ReasonNotEnforceable = "PolicyNotEnforceable"

// failure is an address whose state could not be written, and why.
type failure struct {
	err      error
	policies []string
}

type metrics struct {
	writes *prometheus.CounterVec
	failed prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_policy_writes_total",
			Help: "Pod policy states written to the datapath (set or cleared), by result: ok, or failed (the pod isolated, allowing nothing)."},
			[]string{"result"}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eniwire_policy_failed_pods",
			Help: "Pod addresses whose NetworkPolicy state could not be written: isolated, allowing nothing (fail closed)."}),
	}
	for _, c := range []prometheus.Collector{m.writes, m.failed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the NetworkPolicy metrics: %w", err)
		}
	}
	return m, nil
}

// written counts a write of address a (set when set, else cleared) and reports a failure once, or its
// end; mu held.
func (w *Watcher) written(a netip.Addr, set bool, err error) {
	if err == nil {
		w.metrics.writes.WithLabelValues("ok").Inc()
		if _, was := w.failed[a]; was {
			delete(w.failed, a)
			w.metrics.failed.Set(float64(len(w.failed)))
			w.log.Info("pod policy written after a failure", "pod", a)
		}
		return
	}
	w.metrics.writes.WithLabelValues("failed").Inc()
	if !set {
		w.log.Error("clearing pod policy", "pod", a, "err", err)
		return
	}
	f := failure{err: err, policies: w.compiler.Selecting(a)}
	old, was := w.failed[a]
	w.failed[a] = f
	w.metrics.failed.Set(float64(len(w.failed)))
	if was && old.err.Error() == err.Error() && slices.Equal(old.policies, f.policies) {
		return
	}
	pod := w.podAt(a)
	w.log.Error("pod policy not written; the pod is isolated and allows nothing", "pod", a, "name", pod, "policies", f.policies, "err", err)
	for _, name := range f.policies {
		ns, n, _ := strings.Cut(name, "/")
		np, err := w.factory.Networking().V1().NetworkPolicies().Lister().NetworkPolicies(ns).Get(n)
		if err != nil {
			continue
		}
		w.recorder.Eventf(np, corev1.EventTypeWarning, ReasonNotEnforceable,
			"pod %s (%s) on node %s: its policy could not be written, so it allows nothing: %v", pod, a, w.cfg.NodeName, err)
	}
}

// podAt names the node's pod at address a, or "" ; mu held.
func (w *Watcher) podAt(a netip.Addr) string {
	for k, p := range w.local {
		if w.holds(k, p, a) {
			return k.namespace + "/" + k.name
		}
	}
	return ""
}

// Status is the enforcement's line for the agent's status: the watch's state, how many of the node's pod
// addresses are isolated, and those whose policy could not be written.
func (w *Watcher) Status() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	switch {
	case !w.synced && w.watchErr != nil:
		fmt.Fprintf(&b, "Kubernetes API unreachable before the first lists (%v); the maps keep the policy last written", w.watchErr)
	case !w.synced:
		b.WriteString("listing Pods, Namespaces and NetworkPolicies; the maps keep the policy last written")
	default:
		all := w.compiler.Policies()
		isolated := 0
		for _, p := range all {
			if p.Isolated() {
				isolated++
			}
		}
		fmt.Fprintf(&b, "enforcing: %d of %d pod addresses isolated", isolated, len(all))
		if w.watchErr != nil {
			fmt.Fprintf(&b, "; Kubernetes API unreachable (%v), enforcing what was last compiled", w.watchErr)
		}
	}
	addrs := make([]netip.Addr, 0, len(w.failed))
	for a := range w.failed {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		f := w.failed[a]
		fmt.Fprintf(&b, "; policy of %s (%s) not written, allowing nothing (policies %s): %v", a, w.podAt(a), strings.Join(f.policies, ", "), f.err)
	}
	return b.String()
}
