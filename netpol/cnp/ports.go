package cnp

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// protocolNumbers are the protocols of the API's protocols union, by their field, as IP protocol numbers.
var protocolNumbers = map[string]uint8{"tcp": 6, "udp": 17, "sctp": 132}

// namedPort is the union's field for a destination port by name.
const namedPort = "destinationNamedPort"

// protocolFields are the fields of one protocols entry, exactly one of which is set.
var protocolFields = []string{"tcp", "udp", "sctp", namedPort}

// ports reads a rule's protocols: when given, at least one entry.
func (r *reading) ports(v any, at *field.Path) []Port {
	l, ok := r.boundedList(v, at, true, maxProtocols)
	if !ok {
		return nil
	}
	ports := make([]Port, 0, len(l))
	for k, pv := range l {
		if p, ok := r.port(pv, at.Index(k)); ok {
			ports = append(ports, p)
		}
	}
	return ports
}

// port reads one protocols entry: a protocol with its destinationPort, or a port by name.
func (r *reading) port(v any, at *field.Path) (Port, bool) {
	obj, ok := r.object(v, at)
	if !ok {
		return Port{}, false
	}
	one, ok := r.exactlyOne(obj, at, protocolFields...)
	if !ok {
		return Port{}, false
	}
	at = at.Child(one)
	if one == namedPort {
		return r.portName(obj[one], at)
	}
	proto, ok := r.object(obj[one], at)
	if !ok {
		return Port{}, false
	}
	// The API requires a protocol's destinationPort (minProperties: 1): a protocol alone is no match.
	dv, ok := r.get(proto, at, "destinationPort", true)
	if !ok {
		return Port{}, false
	}
	at = at.Child("destinationPort")
	dest, ok := r.object(dv, at)
	if !ok {
		return Port{}, false
	}
	first, last, ok := r.portNumbers(dest, at)
	if !ok {
		return Port{}, false
	}
	return Port{PortRange: dptypes.PortRange{Protocol: protocolNumbers[one], First: first, Last: last}}, true
}

// portNumbers reads a destinationPort: exactly one of number and range, ports 1..65535, a range's start
// below its end.
func (r *reading) portNumbers(dest map[string]any, at *field.Path) (first, last uint16, ok bool) {
	one, ok := r.exactlyOne(dest, at, "number", "range")
	if !ok {
		return 0, 0, false
	}
	if one == "number" {
		n, ok := r.integer(dest[one], at.Child(one), 1, 65535)
		return uint16(n), uint16(n), ok
	}
	at = at.Child(one)
	rng, ok := r.object(dest[one], at)
	if !ok {
		return 0, 0, false
	}
	bound := func(key string) (uint16, bool) {
		v, ok := r.get(rng, at, key, true)
		if !ok {
			return 0, false
		}
		n, ok := r.integer(v, at.Child(key), 1, 65535)
		return uint16(n), ok
	}
	start, okStart := bound("start")
	end, okEnd := bound("end")
	if !okStart || !okEnd {
		return 0, 0, false
	}
	if start >= end {
		r.refuse(field.Invalid(at, fmt.Sprintf("%d-%d", start, end), "start must be less than end"))
		return 0, 0, false
	}
	return start, end, true
}

// portName reads a destinationNamedPort. A name that no container port can have (not an IANA service name)
// is kept, matching no port, as the API server takes it, and told.
func (r *reading) portName(v any, at *field.Path) (Port, bool) {
	name, ok := r.text(v, at)
	if !ok {
		return Port{}, false
	}
	if name == "" {
		r.refuse(field.Required(at, "a port's name must not be empty"))
		return Port{}, false
	}
	if errs := validation.IsValidPortName(name); len(errs) > 0 {
		r.warn(at, "%q can be no container port's name (%s), so the entry matches no port", name, strings.Join(errs, "; "))
	}
	return Port{Name: name}, true
}
