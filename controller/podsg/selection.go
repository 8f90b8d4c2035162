package podsg

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// ErrTooManyGroups is wrapped by SecurityGroupsOf when the policies that select a pod give it more groups
// than Config.MaxGroupsPerENI: no ENI can carry the set, and the answer stays until a policy changes.
var ErrTooManyGroups = errors.New("more security groups than an ENI may carry")

// errAccountUnseen: a policy of the pod's namespace selects by service account, and the pod's is not in
// the watch (yet, or any more).
var errAccountUnseen = errors.New("not in the watch")

// selection is what the policies give a pod: the union of their groups, and their names; both sorted.
type selection struct{ groups, policies []string }

// selectionOf is what the node's policies give pod p; mu held. Without the CRD no policy exists, so none
// selects it.
func (w *Watcher) selectionOf(p *corev1.Pod) (selection, error) {
	var sel selection
	if w.crdAbsent {
		return sel, nil
	}
	var account labels.Set
	looked := false
	accountLabels := func() (labels.Set, error) {
		if !looked {
			name := accountName(p)
			sa, err := w.accounts.ServiceAccounts(p.Namespace).Get(name)
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("service account %s/%s of pod %s/%s: %w", p.Namespace, name, p.Namespace, p.Name, errAccountUnseen)
			} else if err != nil {
				return nil, err
			}
			account, looked = sa.Labels, true
		}
		return account, nil
	}
	for _, pol := range w.policies[p.Namespace] {
		ok, err := pol.selects(p.Labels, accountLabels)
		if err != nil {
			return selection{}, err
		}
		if ok {
			sel.groups = append(sel.groups, pol.groups...)
			sel.policies = append(sel.policies, pol.name)
		}
	}
	sel.groups = slices.Compact(slices.Sorted(slices.Values(sel.groups)))
	slices.Sort(sel.policies)
	if len(sel.groups) > w.cfg.MaxGroupsPerENI {
		return sel, fmt.Errorf("pod %s/%s: SecurityGroupPolicies %s give it %d security groups %s, more than the %d an ENI may carry: %w",
			p.Namespace, p.Name, strings.Join(sel.policies, ", "), len(sel.groups), groupsText(sel.groups), w.cfg.MaxGroupsPerENI, ErrTooManyGroups)
	}
	return sel, nil
}

// accountName is the pod's service account; the API server's admission sets it, and "default" is what it
// sets when the pod names none.
func accountName(p *corev1.Pod) string {
	if p.Spec.ServiceAccountName == "" {
		return "default"
	}
	return p.Spec.ServiceAccountName
}

// hasValidPolicy reports whether any policy of the namespace can select a pod; mu held.
func (w *Watcher) hasValidPolicy(namespace string) bool {
	if w.crdAbsent {
		return false
	}
	for _, p := range w.policies[namespace] {
		if p.err == nil {
			return true
		}
	}
	return false
}

// groupsText writes a set of groups for people; none is the ENI's default groups (the node's, or its
// ENIConfig's).
func groupsText(groups []string) string {
	if len(groups) == 0 {
		return "the ENI's defaults"
	}
	return "[" + strings.Join(groups, " ") + "]"
}
