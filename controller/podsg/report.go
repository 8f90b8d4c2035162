package podsg

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// The reasons of the Warning Events on a SecurityGroupPolicy: it is ignored, selecting nothing; or the
// policies that select a pod give it more groups than an ENI may carry, and its ADD fails.
const (
	ReasonInvalidPolicy = "InvalidSecurityGroupPolicy"
	ReasonTooManyGroups = "TooManySecurityGroups"
)

// logValidity logs a policy that became invalid, or valid again; mu held. Every node's agent logs it.
func (w *Watcher) logValidity(old, p *policy) {
	switch {
	case p.err != nil && (old == nil || old.err == nil || old.err.Error() != p.err.Error()):
		w.log.Warn("SecurityGroupPolicy ignored: it selects no pod until it is fixed", "policy", p.name, "err", p.err)
	case p.err == nil && old != nil && old.err != nil:
		w.log.Info("SecurityGroupPolicy valid again", "policy", p.name, "groups", p.groups)
	}
}

// reportInvalidTo writes, as a Warning Event on each invalid policy of the namespace, why it is ignored,
// once per mistake, if the node runs pods of the namespace; mu held. Only the agents of the nodes where the
// policy could matter write it: on a large cluster, every agent writing it would be a thousand Events.
func (w *Watcher) reportInvalidTo(namespace string) {
	if w.recorder == nil {
		return
	}
	var pending []*policy
	for _, p := range w.policies[namespace] {
		if p.err != nil && p.err.Error() != p.reported {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return
	}
	if pods, err := w.pods.Pods(namespace).List(labels.Everything()); err != nil || len(pods) == 0 {
		return
	}
	for _, p := range pending {
		p.reported = p.err.Error()
		w.eventOnPolicy(p.name, ReasonInvalidPolicy, "ignored, selecting no pod, until it is fixed: "+p.err.Error())
	}
}

// refuse reports an ADD answered ErrTooManyGroups, once per pod and answer; mu held.
func (w *Watcher) refuse(k podKey, sel selection, err error) {
	msg := err.Error()
	if w.refused[k] == msg {
		return
	}
	w.refused[k] = msg
	w.log.Error("pod refused: its security groups do not fit on one ENI", "pod", k, "policies", sel.policies, "groups", sel.groups,
		"limit", w.cfg.MaxGroupsPerENI)
	for _, name := range sel.policies {
		w.eventOnPolicy(name, ReasonTooManyGroups, fmt.Sprintf("node %s refuses its pod: %s", w.cfg.NodeName, msg))
	}
}

// eventOnPolicy writes a Warning Event on the policy "namespace/name", if the watch still holds it.
func (w *Watcher) eventOnPolicy(name, reason, message string) {
	obj, ok, err := w.policyInf.GetStore().GetByKey(name)
	if err != nil || !ok {
		return
	}
	w.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, reason, message)
}

// Status is the watcher's line for the node's status: the policies seen, and every problem: the CRD
// missing, the API server unreachable, the policies ignored, the pods refused and the running pods whose
// policies now give them other groups.
func (w *Watcher) Status() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	switch {
	case !w.synced && w.watchErr != nil:
		fmt.Fprintf(&b, "Kubernetes API unreachable before the first lists (%v); ADDs wait", w.watchErr)
	case !w.synced:
		b.WriteString("listing Pods, ServiceAccounts and SecurityGroupPolicies; ADDs wait")
	case w.crdAbsent:
		fmt.Fprintf(&b, "the SecurityGroupPolicy CRD (%s) is not installed: no pod gets security groups of its own", crdName)
	default:
		invalid := 0
		for _, ns := range w.policies {
			for _, p := range ns {
				if p.err != nil {
					invalid++
				}
			}
		}
		fmt.Fprintf(&b, "%d SecurityGroupPolicies (%d ignored), %d running pods", w.countPolicies(), invalid, len(w.started))
		if w.watchErr != nil {
			fmt.Fprintf(&b, "; Kubernetes API unreachable (%v), answering from the policies last seen", w.watchErr)
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(w.policies)) {
		for _, name := range slices.Sorted(maps.Keys(w.policies[ns])) {
			if p := w.policies[ns][name]; p.err != nil {
				fmt.Fprintf(&b, "; policy %s ignored: %v", p.name, p.err)
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.refused), comparePodKeys) {
		fmt.Fprintf(&b, "; %s refused: %s", k, w.refused[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.started), comparePodKeys) {
		if s := w.started[k]; s.reported != "" {
			fmt.Fprintf(&b, "; %s keeps %s until recreated, %s", k, groupsText(s.groups), s.reported)
		}
	}
	return b.String()
}

func comparePodKeys(a, b podKey) int { return strings.Compare(a.String(), b.String()) }
