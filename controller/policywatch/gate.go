package policywatch

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/kubewatch"
)

// assignment is the addresses an ADD gave a pod (its UID; a dual-stack pod's two), kept until
// status.podIPs names them.
type assignment struct {
	uid types.UID
	ips []netip.Addr
}

// BeforePodUp implements the controller's PodGate: it returns once the pod's NetworkPolicy state, compiled
// at ips (a dual-stack pod's IPv4 and IPv6), is written, so the pod's first packet meets it. It waits, up to Config.PodWait, for the first
// lists and for the watch to report the pod with the ADD's UID; past that, it fails the ADD (the runtime
// retries it). A pod without a name is no Kubernetes pod: no policy selects it. A state that cannot be
// written leaves the pod isolated, allowing nothing (reported as failures.go says), and the ADD goes on.
func (w *Watcher) BeforePodUp(ctx context.Context, id api.PodIdentity, ips ...netip.Addr) error {
	if id.Name == "" || len(ips) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.PodWait)
	defer cancel()
	k := podKey{id.Namespace, id.Name}
	for {
		w.mu.Lock()
		p, seen := w.local[k]
		if w.synced && seen && kubewatch.SameUID(p, types.UID(id.UID)) {
			w.assigned[k] = assignment{uid: p.UID, ips: slices.Clone(ips)}
			// Every address of every ADD is written, whatever the compiler thinks it wrote: a failed ADD's
			// release cleared the address's state in the datapath without telling it, and the retried ADD
			// (or the next replica) gets the same address at once.
			changed := w.compiler.UpsertPod(w.withAssigned(k, p))
			for _, ip := range ips {
				if !slices.Contains(changed, ip) {
					changed = append(changed, ip)
				}
			}
			w.apply(changed)
			w.mu.Unlock()
			return nil
		}
		wait, synced, werr := w.seen, w.synced, w.watchErr
		w.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			what := fmt.Sprintf("pod %s/%s (uid %s) not in the watch", id.Namespace, id.Name, id.UID)
			if !synced {
				what = "the first lists of Pods, Namespaces and NetworkPolicies not in"
			}
			if werr != nil {
				return fmt.Errorf("waiting for its NetworkPolicy: %s after %s (%v): %w", what, w.cfg.PodWait, werr, ctx.Err())
			}
			return fmt.Errorf("waiting for its NetworkPolicy: %s after %s: %w", what, w.cfg.PodWait, ctx.Err())
		}
	}
}

// withAssigned is p with the addresses its ADD gave it, until status.podIPs names them all: kubelet
// writes them only after the ADD answers, and a pod whose sandbox was made again shows its old addresses
// until then. Once status.podIPs names them, or the pod is another with the same name, the assigned addresses
// are forgotten. mu held.
func (w *Watcher) withAssigned(k podKey, p *corev1.Pod) *corev1.Pod {
	a, ok := w.assigned[k]
	switch {
	case !ok:
		return p
	case a.uid != p.UID || namesAll(addrsOf(p), a.ips):
		delete(w.assigned, k)
		return p
	}
	q := p.DeepCopy()
	q.Status.PodIP = a.ips[0].String()
	q.Status.PodIPs = nil
	for _, ip := range a.ips {
		q.Status.PodIPs = append(q.Status.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	return q
}

// namesAll reports whether have holds every address of want.
func namesAll(have, want []netip.Addr) bool {
	for _, ip := range want {
		if !slices.Contains(have, ip) {
			return false
		}
	}
	return true
}
