package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// A pinned map's layout is judged by its BTF, not only by its key and value sizes: a field moved or
// retyped within the same size reads as garbage through the new programs. Two layouts match when every
// struct has the same size and the same fields (name, offset, bitfield size, layout), every array the
// same length, every integer the same size and sign; an enum may gain values (the counters' verdicts do),
// never change one.

// errLayoutChanged matches a layout difference found in BTF.
var errLayoutChanged = errors.New("layout changed")

// pinnedLayoutDiffers compares the key and value types of a pinned map (from the BTF it was created
// with) with the spec's, by name. A key or value type the pinned BTF lacks counts as changed. A map the
// kernel keeps without BTF (an array keyed by an enum: the kernel wants an int key) is judged by its sizes
// alone.
func pinnedLayoutDiffers(m *ebpf.Map, spec *ebpf.MapSpec) error {
	info, err := m.Info()
	if err != nil {
		return fmt.Errorf("reading map info: %w", err)
	}
	id, ok := info.BTFID()
	if !ok {
		return nil
	}
	h, err := btf.NewHandleFromID(id)
	if errors.Is(err, os.ErrPermission) {
		// Opening BTF by id needs CAP_SYS_ADMIN, which the agent's container is not given (CAP_BPF and
		// CAP_NET_ADMIN are): the sizes, already compared, are what can be judged. Replacing every pinned map
		// on each restart instead would empty the maps the running pods depend on.
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening the pinned map's BTF: %w", err)
	}
	defer h.Close()
	pinned, err := h.Spec(nil)
	if err != nil {
		return fmt.Errorf("reading the pinned map's BTF: %w", err)
	}
	for _, t := range []struct {
		what string
		typ  btf.Type
	}{{"key", spec.Key}, {"value", spec.Value}} {
		if t.typ == nil {
			continue
		}
		name := t.typ.TypeName()
		if name == "" {
			continue // anonymous: the sizes, already compared, are all there is
		}
		olds, err := pinned.AnyTypesByName(name)
		if err != nil || len(olds) == 0 {
			return fmt.Errorf("%s type %s: not in the pinned BTF: %w", t.what, name, errLayoutChanged)
		}
		// A name may stand for a typedef and the type it names; one of them must match.
		var errs []error
		for _, old := range olds {
			err := sameLayout(old, t.typ)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%s type %s: %w", t.what, name, err)
		}
	}
	return nil
}

// sameLayout reports whether data written as old reads correctly as new.
func sameLayout(old, new btf.Type) error {
	old, new = btf.UnderlyingType(old), btf.UnderlyingType(new)
	switch o := old.(type) {
	case *btf.Int:
		n, ok := new.(*btf.Int)
		if !ok || n.Size != o.Size || n.Encoding != o.Encoding {
			return fmt.Errorf("%v became %v: %w", old, new, errLayoutChanged)
		}
	case *btf.Enum:
		n, ok := new.(*btf.Enum)
		if !ok || n.Size != o.Size {
			return fmt.Errorf("%v became %v: %w", old, new, errLayoutChanged)
		}
		values := map[string]uint64{}
		for _, v := range n.Values {
			values[v.Name] = v.Value
		}
		for _, v := range o.Values {
			if got, ok := values[v.Name]; !ok || got != v.Value {
				return fmt.Errorf("enum %s value %s changed: %w", o.Name, v.Name, errLayoutChanged)
			}
		}
	case *btf.Array:
		n, ok := new.(*btf.Array)
		if !ok || n.Nelems != o.Nelems {
			return fmt.Errorf("%v became %v: %w", old, new, errLayoutChanged)
		}
		return sameLayout(o.Type, n.Type)
	case *btf.Struct:
		n, ok := new.(*btf.Struct)
		if !ok {
			return fmt.Errorf("%v became %v: %w", old, new, errLayoutChanged)
		}
		return sameMembers(o.Name, o.Size, n.Size, o.Members, n.Members)
	case *btf.Union:
		n, ok := new.(*btf.Union)
		if !ok {
			return fmt.Errorf("%v became %v: %w", old, new, errLayoutChanged)
		}
		return sameMembers(o.Name, o.Size, n.Size, o.Members, n.Members)
	default:
		return fmt.Errorf("%v is not a map layout eniwire uses: %w", old, errLayoutChanged)
	}
	return nil
}

// renamedMembers are fields whose name changed while their bytes and what recovery makes of them did not,
// as struct.old -> new: policy_peer_key's policy_id became peer_set, and recoverPolicies gives each policy id
// of an earlier agent the peer set of the same number (policy.go), so its entries are kept as they are;
// pod_value's pad became path, which an earlier agent always wrote 0 (every pod's path).
var renamedMembers = map[string]string{"policy_peer_key.policy_id": "peer_set", "pod_value.pad": "path"}

func sameMembers(name string, oldSize, newSize uint32, old, new []btf.Member) error {
	if oldSize != newSize || len(old) != len(new) {
		return fmt.Errorf("%s: size or member count changed: %w", name, errLayoutChanged)
	}
	for i := range old {
		o, n := old[i], new[i]
		if (o.Name != n.Name && renamedMembers[name+"."+o.Name] != n.Name) || o.Offset != n.Offset || o.BitfieldSize != n.BitfieldSize {
			return fmt.Errorf("%s.%s became %s.%s: %w", name, o.Name, name, n.Name, errLayoutChanged)
		}
		if err := sameLayout(o.Type, n.Type); err != nil {
			return fmt.Errorf("%s.%s: %w", name, o.Name, err)
		}
	}
	return nil
}
