package podsg

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/eniwire/eniwire/controller/kubewatch"
)

// SecurityGroupsOf returns the sorted, de-duplicated union of the groups of every SecurityGroupPolicy that
// selects the pod, and the selecting policies' names ("namespace/name", sorted); both empty when none
// selects it. It waits (up to Config.PodWait) for the first lists and for the pod (with this UID, if uid
// is not empty) to be in the watch, like policywatch.BeforePodUp; and for the pod's service account, when a
// policy of its namespace selects by service account. A namespace without a valid policy is answered at
// once, its pod unseen: no labels can change that answer. A union larger than Config.MaxGroupsPerENI
// fails with ErrTooManyGroups, naming the policies, the set and the limit. A pod without a name is no
// Kubernetes pod: no policy selects it.
func (w *Watcher) SecurityGroupsOf(ctx context.Context, namespace, name, uid string) (groups, policies []string, err error) {
	if name == "" {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.PodWait)
	defer cancel()
	k := podKey{namespace, name}
	for {
		w.mu.Lock()
		sel, waitingFor, err := w.answer(k, types.UID(uid))
		wait, werr := w.seen, w.watchErr
		w.mu.Unlock()
		if waitingFor == "" {
			return sel.groups, sel.policies, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			if werr != nil {
				return nil, nil, fmt.Errorf("waiting for its security groups: %s after %s (%v): %w", waitingFor, w.cfg.PodWait, werr, ctx.Err())
			}
			return nil, nil, fmt.Errorf("waiting for its security groups: %s after %s: %w", waitingFor, w.cfg.PodWait, ctx.Err())
		}
	}
}

// answer is the pod's selection, or what it waits for; mu held. An answer ErrTooManyGroups is reported.
func (w *Watcher) answer(k podKey, uid types.UID) (sel selection, waitingFor string, err error) {
	if !w.synced {
		return sel, "the first lists of Pods, ServiceAccounts and SecurityGroupPolicies not in", nil
	}
	if !w.hasValidPolicy(k.namespace) {
		delete(w.refused, k)
		return sel, "", nil
	}
	p, err := w.pods.Pods(k.namespace).Get(k.name)
	switch {
	case err != nil:
		return sel, fmt.Sprintf("pod %s (uid %s) not in the watch", k, uid), nil
	case !kubewatch.SameUID(p, uid):
		return sel, fmt.Sprintf("pod %s (uid %s) not in the watch, which has uid %s", k, uid, p.UID), nil
	}
	sel, err = w.selectionOf(p)
	switch {
	case errors.Is(err, errAccountUnseen):
		return sel, err.Error(), nil
	case errors.Is(err, ErrTooManyGroups):
		w.refuse(k, sel, err)
		return selection{}, "", err
	case err != nil:
		return selection{}, "", err
	}
	delete(w.refused, k)
	return sel, "", nil
}
