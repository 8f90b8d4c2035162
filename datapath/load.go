package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/bpf"
)

// loadSpec returns the programs' spec with the configuration constants set.
func loadSpec(cfg Config) (*ebpf.CollectionSpec, error) {
	spec, err := bpf.LoadEniwire()
	if err != nil {
		return nil, fmt.Errorf("loading the BPF object: %w", err)
	}
	snat := uint8(0)
	if cfg.SNAT {
		snat = 1
	}
	if err := spec.Variables[bpf.EniwireVarSnatEnabled].Set(snat); err != nil {
		return nil, fmt.Errorf("setting snat_enabled: %w", err)
	}
	// Per-pod counters: one entry per pod the node can run, allocated as pods appear.
	spec.Maps[bpf.EniwireMapPodStats].MaxEntries = uint32(cfg.MaxPods)
	return spec, nil
}

// retiredMaps are maps earlier versions pinned and this one no longer has: unpinned once the links have
// moved to the new programs, and by Uninstall.
var retiredMaps = []string{"host_flows"}

// unpinRetiredMaps removes the pins of retiredMaps; the maps live on while an old program still uses them.
func unpinRetiredMaps(pinRoot string, log *slog.Logger) error {
	for _, name := range retiredMaps {
		pin := filepath.Join(pinRoot, mapsDir, name)
		err := os.Remove(pin)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("unpinning retired map %s: %w", pin, err)
		}
		log.Info("unpinned a map this version no longer uses", "map", name)
	}
	return nil
}

// errNoConntrackKfuncs explains a load that failed for want of the conntrack kfuncs.
var errNoConntrackKfuncs = errors.New("the kernel lacks the conntrack kfuncs bpf_skb_ct_lookup/bpf_ct_release (Linux 5.18 or later, nf_conntrack built in or loaded)")

// loadObjects loads the programs, reusing the maps pinned under pinRoot/maps and pinning those that are
// new. A pinned map whose type, sizes, flags or BTF layout changed is reported as a *MapIncompatibleError,
// or replaced when migrate is set; a replaced map whose layout is unchanged (a resize, new flags) has its
// entries carried over into the new one here, before any link moves to the new programs.
//
// It also returns the policy flags of the pods of a replaced pods map whose entries could not be carried
// (carryflags.go), nil when there is none.
func loadObjects(spec *ebpf.CollectionSpec, pinRoot string, migrate bool, log *slog.Logger) (*bpf.EniwireObjects, map[netip.Addr]uint32, error) {
	dir := filepath.Join(pinRoot, mapsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating pin directory %s: %w", dir, err)
	}
	carried := map[string]*ebpf.Map{}
	var podFlags map[netip.Addr]uint32
	defer func() {
		for _, m := range carried {
			m.Close()
		}
	}()
	for name, m := range spec.Maps {
		if strings.HasPrefix(name, ".") {
			continue // .rodata holds configuration: per load, never shared
		}
		m.Pinning = ebpf.PinByName
		old, flags, err := checkPinnedMap(dir, name, m, migrate, log)
		if err != nil {
			return nil, nil, err
		}
		if flags != nil {
			podFlags = flags
		}
		if old != nil {
			carried[name] = old
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}})
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) && strings.Contains(err.Error(), "kfunc") {
			return nil, nil, fmt.Errorf("loading programs: %w: %w", errNoConntrackKfuncs, err)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, nil, fmt.Errorf("loading programs: %+v", ve)
		}
		return nil, nil, fmt.Errorf("loading programs: %w", err)
	}
	defer coll.Close()
	for name, old := range carried {
		n, err := copyEntries(old, coll.Maps[name])
		if err != nil {
			return nil, nil, fmt.Errorf("carrying %s over to its new map: %w", name, err)
		}
		log.Info("carried a map's entries over to its new layout", "map", name, "entries", n)
	}
	var objs bpf.EniwireObjects
	if err := coll.Assign(&objs); err != nil {
		return nil, nil, fmt.Errorf("assigning programs and maps: %w", err)
	}
	return &objs, podFlags, nil
}

// checkPinnedMap compares a pinned map with its spec before load, so a layout change is named and handled
// deliberately instead of surfacing as a load failure, or worse, a map read with the wrong layout. When
// it unpins a map whose entries the new one can take as they are, it returns the old map, open; when it
// lets the pods map go, the pods' policy flags it held.
func checkPinnedMap(dir, name string, spec *ebpf.MapSpec, migrate bool, log *slog.Logger) (*ebpf.Map, map[netip.Addr]uint32, error) {
	pin := filepath.Join(dir, name)
	m, err := ebpf.LoadPinnedMap(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("opening pinned map %s: %w", pin, err)
	}
	cerr := spec.Compatible(m)
	lerr := pinnedLayoutDiffers(m, spec)
	if cerr == nil && lerr == nil {
		m.Close()
		return nil, nil, nil
	}
	reason := errors.Join(cerr, lerr)
	if !migrate {
		m.Close()
		return nil, nil, &MapIncompatibleError{Map: name, Pin: pin, Err: reason}
	}
	// Unpinning leaves the old map alive for programs still attached; they move to the new map when
	// their links are updated, after the new map is filled.
	if err := m.Unpin(); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unpinning incompatible map %s: %w", pin, err)
	}
	carry := lerr == nil && m.Type() == spec.Type && m.KeySize() == spec.KeySize && m.ValueSize() == spec.ValueSize &&
		!perCPU(spec.Type)
	if !carry {
		var flags map[netip.Addr]uint32
		if name == bpf.EniwireMapPods {
			if flags, err = oldPodFlags(m); err != nil {
				log.Warn("the replaced pods map's policy flags could not be read; its pods are open until the policy watch writes them", "pin", pin, "error", err)
				flags = nil
			} else {
				log.Info("carrying the pods' policy flags over to the new pods map", "pods", len(flags))
			}
		}
		m.Close()
		log.Warn("replaced incompatible pinned map; its entries must be rewritten", "map", name, "pin", pin, "reason", reason.Error())
		return nil, flags, nil
	}
	log.Info("replacing pinned map with one of the same layout", "map", name, "pin", pin, "reason", reason.Error())
	return m, nil, nil
}

// perCPU maps hold statistics only (counters, pod_stats): they start again from zero when replaced.
func perCPU(t ebpf.MapType) bool {
	return t == ebpf.PerCPUHash || t == ebpf.PerCPUArray || t == ebpf.LRUCPUHash
}

// copyEntries puts every entry of from into to, as raw bytes: both share one layout.
func copyEntries(from, to *ebpf.Map) (int, error) {
	k, v := make([]byte, from.KeySize()), make([]byte, from.ValueSize())
	n := 0
	it := from.Iterate()
	for it.Next(&k, &v) {
		if err := to.Put(k, v); err != nil {
			return n, err
		}
		n++
	}
	return n, it.Err()
}
