package podsg

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// groupID is an EC2 security group id: sg- and 8 hex digits (older groups) or 17 (newer ones).
var groupID = regexp.MustCompile(`^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})$`)

// policy is one SecurityGroupPolicy as the watcher reads it.
type policy struct {
	name string // namespace/name
	// pods and accounts are the two selectors; nil when the policy does not give one, which then is not
	// consulted. An empty selector ({}) is labels.Everything.
	pods, accounts labels.Selector
	groups         []string // sorted, de-duplicated
	// err is why the policy is ignored: it then selects nothing, never a part of what it says.
	err error
	// reported is the err last written as an Event on the policy, so an unchanged mistake is told once.
	reported string
}

// spec is SecurityGroupPolicySpec of the AWS VPC resource controller (apis/vpcresources/v1beta1), with its
// JSON field names.
type spec struct {
	PodSelector            *metav1.LabelSelector `json:"podSelector,omitempty"`
	ServiceAccountSelector *metav1.LabelSelector `json:"serviceAccountSelector,omitempty"`
	SecurityGroups         struct {
		GroupIDs []string `json:"groupIds,omitempty"`
	} `json:"securityGroups,omitempty"`
}

// parse reads a SecurityGroupPolicy. A policy that names neither selector, gives no group, names something
// that is not a group id, or has a selector that does not parse, is kept with err set and selects nothing.
func parse(u *unstructured.Unstructured) *policy {
	p := &policy{name: u.GetNamespace() + "/" + u.GetName()}
	invalid := func(format string, args ...any) *policy {
		return &policy{name: p.name, err: fmt.Errorf(format, args...)}
	}
	raw, _, err := unstructured.NestedMap(u.Object, "spec")
	if err != nil {
		return invalid("spec: %v", err)
	}
	var s spec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &s); err != nil {
		return invalid("spec: %v", err)
	}
	if s.PodSelector == nil && s.ServiceAccountSelector == nil {
		return invalid("it has neither spec.podSelector nor spec.serviceAccountSelector, so it selects no pod")
	}
	if s.PodSelector != nil {
		if p.pods, err = metav1.LabelSelectorAsSelector(s.PodSelector); err != nil {
			return invalid("spec.podSelector: %v", err)
		}
	}
	if s.ServiceAccountSelector != nil {
		if p.accounts, err = metav1.LabelSelectorAsSelector(s.ServiceAccountSelector); err != nil {
			return invalid("spec.serviceAccountSelector: %v", err)
		}
	}
	if len(s.SecurityGroups.GroupIDs) == 0 {
		return invalid("spec.securityGroups.groupIds is empty, so it gives no security group")
	}
	var bad []string
	for _, g := range s.SecurityGroups.GroupIDs {
		if !groupID.MatchString(g) {
			bad = append(bad, fmt.Sprintf("%q", g))
		}
	}
	if len(bad) > 0 {
		return invalid("spec.securityGroups.groupIds: %s: not security group ids (sg- and 8 or 17 hex digits)", strings.Join(bad, ", "))
	}
	p.groups = slices.Compact(slices.Sorted(slices.Values(s.SecurityGroups.GroupIDs)))
	return p
}

// selects reports whether the policy selects a pod with these labels whose service account has those:
// each selector the policy gives must match (the AWS VPC resource controller's rule), and a policy with
// err selects nothing. account is asked only when the policy has a service account selector.
func (p *policy) selects(pod labels.Set, account func() (labels.Set, error)) (bool, error) {
	if p.err != nil || (p.pods != nil && !p.pods.Matches(pod)) {
		return false, nil
	}
	if p.accounts == nil {
		return true, nil
	}
	a, err := account()
	if err != nil {
		return false, err
	}
	return p.accounts.Matches(a), nil
}
