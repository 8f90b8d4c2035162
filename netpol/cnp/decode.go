package cnp

import (
	"fmt"
	"math"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// reading is one Parse under way: what refuses the policy, and what is only worth saying. The object is
// read field by field, as the dynamic informer holds it (JSON's values: maps, lists, strings, int64), so
// that each problem is told at its own path and every one is told, not the first alone.
type reading struct {
	name     string
	errs     field.ErrorList
	warnings []string
}

func (r *reading) refuse(errs ...*field.Error) { r.errs = append(r.errs, errs...) }

// warn records something of the policy that eniwire applies otherwise than it is written.
func (r *reading) warn(at *field.Path, format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf("ClusterNetworkPolicy %q: %s: %s", r.name, at, fmt.Sprintf(format, args...)))
}

// get returns obj's field key (at is obj's path), and whether it is set. Absent and null are the same: the
// API server drops a null of a field its schema does not make nullable. A required field not set is refused.
func (r *reading) get(obj map[string]any, at *field.Path, key string, required bool) (any, bool) {
	v := obj[key]
	if v == nil && required {
		r.refuse(field.Required(at.Child(key), ""))
	}
	return v, v != nil
}

// as returns v as a T, refusing it (at is v's path) when it is of another JSON type; what names that type.
func as[T any](r *reading, v any, at *field.Path, what string) (T, bool) {
	t, ok := v.(T)
	if !ok {
		r.refuse(field.TypeInvalid(at, v, "must be "+what))
	}
	return t, ok
}

func (r *reading) object(v any, at *field.Path) (map[string]any, bool) {
	return as[map[string]any](r, v, at, "an object")
}

func (r *reading) list(v any, at *field.Path) ([]any, bool) { return as[[]any](r, v, at, "a list") }

func (r *reading) text(v any, at *field.Path) (string, bool) { return as[string](r, v, at, "a string") }

// integer returns v as an integer, within lo..hi, both included. It is read whole and then checked, so that
// no number out of range wraps into a valid one, as converting into an int32 field would do. int64 is what
// JSON decoding into unstructured gives; float64, what a decoder without that care gives, must be whole.
func (r *reading) integer(v any, at *field.Path, lo, hi int64) (int64, bool) {
	var i int64
	switch n := v.(type) {
	case int64:
		i = n
	case int:
		i = int64(n)
	case float64:
		if n != math.Trunc(n) || math.Abs(n) >= 1<<53 {
			r.refuse(field.TypeInvalid(at, v, "must be an integer"))
			return 0, false
		}
		i = int64(n)
	default:
		r.refuse(field.TypeInvalid(at, v, "must be an integer"))
		return 0, false
	}
	if i < lo || i > hi {
		r.refuse(field.Invalid(at, i, fmt.Sprintf("must be between %d and %d", lo, hi)))
		return 0, false
	}
	return i, true
}

// boundedList returns v as a list of at most limit items (the CRD's maxItems), and at least one when
// nonEmpty (its minItems: 1).
func (r *reading) boundedList(v any, at *field.Path, nonEmpty bool, limit int) ([]any, bool) {
	l, ok := r.list(v, at)
	switch {
	case !ok:
		return nil, false
	case nonEmpty && len(l) == 0:
		r.refuse(field.Required(at, "must have at least one item"))
		return nil, false
	case len(l) > limit:
		r.refuse(field.TooMany(at, len(l), limit))
		return nil, false
	}
	return l, true
}

// union returns which one of the known fields obj sets, for the API's unions ("exactly one field must be
// set"). More than one is refused (ok false). None set returns "" and ok, with the fields obj does set that
// are not known, sorted: the field of a newer CRD, which the caller judges.
func (r *reading) union(obj map[string]any, at *field.Path, known ...string) (one string, unknown []string, ok bool) {
	var set []string
	for _, k := range known {
		if obj[k] != nil {
			set = append(set, k)
		}
	}
	for k, v := range obj {
		if v != nil && !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	switch len(set) {
	case 0:
		return "", unknown, true
	case 1:
		return set[0], nil, true
	}
	r.refuse(field.Invalid(at, strings.Join(set, ", "), "exactly one of "+strings.Join(known, ", ")+" may be set"))
	return "", nil, false
}

// exactlyOne is union where setting none of the known fields is refused too.
func (r *reading) exactlyOne(obj map[string]any, at *field.Path, known ...string) (string, bool) {
	one, unknown, ok := r.union(obj, at, known...)
	if ok && one == "" {
		detail := "exactly one of " + strings.Join(known, ", ") + " must be set"
		if len(unknown) > 0 {
			detail += "; eniwire knows no field " + strings.Join(unknown, ", ")
		}
		r.refuse(field.Required(at, detail))
		return "", false
	}
	return one, ok
}

// selector builds a label selector, refusing one the API server would: an unknown operator, values where
// the operator takes none or none where it needs them, an invalid label key or value.
func (r *reading) selector(v any, at *field.Path) (labels.Selector, bool) {
	obj, ok := r.object(v, at)
	if !ok {
		return nil, false
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &ls); err != nil {
		r.refuse(field.Invalid(at, obj, "not a label selector: "+err.Error()))
		return nil, false
	}
	if errs := metav1validation.ValidateLabelSelector(&ls, metav1validation.LabelSelectorValidationOptions{}, at); len(errs) > 0 {
		r.refuse(errs...)
		return nil, false
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		r.refuse(field.Invalid(at, obj, err.Error()))
		return nil, false
	}
	return s, true
}

// enum reads obj's required field key (at is obj's path), which must be one of allowed.
func enum[T ~string](r *reading, obj map[string]any, at *field.Path, key string, allowed ...T) (T, bool) {
	v, ok := r.get(obj, at, key, true)
	if !ok {
		return "", false
	}
	s, ok := r.text(v, at.Child(key))
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, T(s)) {
		r.refuse(field.NotSupported(at.Child(key), s, allowed))
		return "", false
	}
	return T(s), true
}
