package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// An upgrade that replaces the pods map (its layout changed) starts the new map empty: Restore writes the
// pods again from the agent's journal, which knows their addresses and interfaces but not their
// NetworkPolicy flags, which only the map held. Recovered from the new, empty map, every pod would run
// open until the policy watch listed everything again. So the old map's flags are read, by the old
// layout's BTF (struct pod_value's field flags, wherever it sits), before the map is let go, and
// recoverPolicies takes them as if the new map held them: Restore's PutPod writes each pod with its flags.

// podValueType and podFlagsField name what the old layout is searched for.
const (
	podValueType  = "pod_value"
	podFlagsField = "flags"
	// shippedPodFlagsOffset is the flags' byte offset in every struct pod_value released so far (after
	// host_ifindex and eni_ifindex).
	shippedPodFlagsOffset = 8
)

// oldPodFlags reads each pod's policy flags from a pods map of another layout, by the BTF it was created
// with. The key, struct ip_addr, is 16 bytes in every layout so far; a map whose key is not, or whose BTF
// cannot be read or has no 32-bit flags field, yields an error, and its pods start without flags.
func oldPodFlags(m *ebpf.Map) (map[netip.Addr]uint32, error) {
	if m.KeySize() != 16 {
		return nil, fmt.Errorf("key of %d bytes, want a 16-byte struct ip_addr", m.KeySize())
	}
	off, err := podFlagsOffset(m)
	if errors.Is(err, os.ErrPermission) {
		// Opening BTF by id needs CAP_SYS_ADMIN, which the agent's container is not given (layout.go): the
		// flags are where every layout shipped so far has them.
		off, err = shippedPodFlagsOffset, nil
	}
	if err != nil {
		return nil, err
	}
	if off+4 > m.ValueSize() {
		return nil, fmt.Errorf("flags at byte %d of a %d-byte value", off, m.ValueSize())
	}
	out := map[netip.Addr]uint32{}
	k, v := make([]byte, m.KeySize()), make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		if f := binary.NativeEndian.Uint32(v[off:]); f != 0 {
			out[netip.AddrFrom16([16]byte(k)).Unmap()] = f
		}
	}
	return out, it.Err()
}

// podFlagsOffset is the byte offset of struct pod_value's flags in the map's own BTF.
func podFlagsOffset(m *ebpf.Map) (uint32, error) {
	info, err := m.Info()
	if err != nil {
		return 0, fmt.Errorf("reading map info: %w", err)
	}
	id, ok := info.BTFID()
	if !ok {
		return 0, fmt.Errorf("the map has no BTF")
	}
	h, err := btf.NewHandleFromID(id)
	if err != nil {
		return 0, fmt.Errorf("opening the map's BTF: %w", err)
	}
	defer h.Close()
	spec, err := h.Spec(nil)
	if err != nil {
		return 0, fmt.Errorf("reading the map's BTF: %w", err)
	}
	var s *btf.Struct
	if err := spec.TypeByName(podValueType, &s); err != nil {
		return 0, fmt.Errorf("struct %s: %w", podValueType, err)
	}
	for _, f := range s.Members {
		if f.Name != podFlagsField {
			continue
		}
		if i, ok := btf.UnderlyingType(f.Type).(*btf.Int); !ok || i.Size != 4 || f.Offset%8 != 0 {
			return 0, fmt.Errorf("struct %s's %s is %v at bit %d, want a 32-bit integer", podValueType, podFlagsField, f.Type, f.Offset)
		}
		return uint32(f.Offset / 8), nil
	}
	return 0, fmt.Errorf("struct %s has no field %s", podValueType, podFlagsField)
}
