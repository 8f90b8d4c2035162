package podsg

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eniwire/eniwire/controller/kubewatch"
)

// ReasonGroupsChanged is the reason of the Warning Event on a running pod whose policies now give it other
// security groups than it started with: an ENI's groups are the pod's for its life, so the new set applies
// only to a new pod.
const ReasonGroupsChanged = "SecurityGroupsChanged"

// startedPod is a running pod of the node and the groups it was given.
type startedPod struct {
	uid    types.UID
	groups []string
	// reported is the answer last reported in an Event as differing from groups; "" while they agree.
	reported string
}

// Started tells the watcher which groups a running pod was given (at ADD, and for every pod the
// controller's books hold after a restart), so a later policy change that would give it other groups is
// reported.
func (w *Watcher) Started(namespace, name, uid string, groups []string) {
	k := podKey{namespace, name}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.refused, k)
	delete(w.unavailable, k)
	w.started[k] = &startedPod{uid: types.UID(uid), groups: slices.Compact(slices.Sorted(slices.Values(groups)))}
	w.recheck(func(s podKey, _ *startedPod) bool { return s == k })
}

// Stopped forgets the pod (an empty uid: whichever is known by that name).
func (w *Watcher) Stopped(namespace, name, uid string) {
	k := podKey{namespace, name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.started[k]; ok && (uid == "" || s.uid == types.UID(uid)) {
		delete(w.started, k)
	}
	delete(w.refused, k)
	delete(w.unavailable, k)
}

// recheck compares, for each started pod that which says, the groups it runs with to what the policies
// give it now, and reports each new difference once, as a Warning Event on the pod; mu held. Before the
// first lists are in, what the watch holds is partial, and nothing is compared.
func (w *Watcher) recheck(which func(podKey, *startedPod) bool) {
	if !w.synced {
		return
	}
	for k, s := range w.started {
		if !which(k, s) {
			continue
		}
		p, err := w.pods.Pods(k.namespace).Get(k.name)
		if err != nil || !kubewatch.SameUID(p, s.uid) {
			continue
		}
		sel, err := w.selectionOf(p)
		if err == nil && slices.Equal(sel.groups, s.groups) {
			s.reported = ""
			continue
		}
		now := answerText(sel, err)
		if now == s.reported {
			continue
		}
		s.reported = now
		w.log.Warn("a running pod's security groups differ from what its policies now give; they stay until it is recreated",
			"pod", k, "groups", s.groups, "now", now)
		w.recorder.Event(p, corev1.EventTypeWarning, ReasonGroupsChanged,
			fmt.Sprintf("its security groups stay %s until it is recreated; a new pod %s", groupsText(s.groups), now))
	}
}

// answerText is what a new pod would get, for people.
func answerText(sel selection, err error) string {
	switch {
	case err != nil:
		return "would be refused: " + err.Error()
	case len(sel.policies) == 0:
		return "would get none of its own: no SecurityGroupPolicy selects it"
	}
	return "would get " + groupsText(sel.groups) + " from SecurityGroupPolicies " + strings.Join(sel.policies, ", ")
}
