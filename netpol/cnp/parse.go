package cnp

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The CRD's limits.
const (
	maxRules     = 25   // spec.ingress, spec.egress
	maxPeers     = 25   // a rule's from, to
	maxNetworks  = 25   // a networks peer
	maxProtocols = 25   // a rule's protocols
	maxRuleName  = 100  // a rule's name, in bytes
	maxPriority  = 1000 // spec.priority, from 0
)

const kind = "ClusterNetworkPolicy"

// apiVersions are the versions the CRD serves, both with one schema.
var apiVersions = []string{Resource.GroupVersion().String(), Resource.Group + "/v1alpha2"}

// Parse reads one ClusterNetworkPolicy, of apiVersion policy.networking.k8s.io/v1beta1 or v1alpha2, as a
// dynamic informer holds it. It returns the policy whole, with Warnings saying what fails closed, or refuses
// it whole with an *InvalidError naming the policy and every problem at its field path: a policy is never
// applied in part (doc.go says what refuses and what warns).
func Parse(u *unstructured.Unstructured) (*Policy, error) {
	r := &reading{name: u.GetName()}
	p := r.policy(u.Object)
	if len(r.errs) > 0 {
		return nil, &InvalidError{Policy: r.name, Errs: r.errs}
	}
	p.Warnings = r.warnings
	return p, nil
}

func (r *reading) policy(obj map[string]any) *Policy {
	p := &Policy{Name: r.name}
	enum(r, obj, nil, "apiVersion", apiVersions...)
	enum(r, obj, nil, "kind", kind)
	at := field.NewPath("spec")
	v, ok := r.get(obj, nil, "spec", true)
	if !ok {
		return p
	}
	spec, ok := r.object(v, at)
	if !ok {
		return p
	}
	p.Tier, _ = enum(r, spec, at, "tier", Admin, Baseline)
	if v, ok := r.get(spec, at, "priority", true); ok {
		n, _ := r.integer(v, at.Child("priority"), 0, maxPriority)
		p.Priority = int32(n)
	}
	if v, ok := r.get(spec, at, "subject", true); ok {
		p.Subject = r.subject(v, at.Child("subject"))
	}
	p.Ingress = r.rules(spec, at, "ingress", ingress)
	p.Egress = r.rules(spec, at, "egress", egress)
	return p
}

// rules reads spec's list of rules of one direction; the list is optional, and may be empty.
func (r *reading) rules(spec map[string]any, at *field.Path, key string, d direction) []Rule {
	v, ok := r.get(spec, at, key, false)
	if !ok {
		return nil
	}
	l, ok := r.boundedList(v, at.Child(key), false, maxRules)
	if !ok {
		return nil
	}
	rules := make([]Rule, 0, len(l))
	for i, rv := range l {
		rules = append(rules, r.rule(rv, at.Child(key).Index(i), d))
	}
	return rules
}
