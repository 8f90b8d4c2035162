package datapath

import (
	"errors"
	"fmt"
	"log/slog"
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
// new. A pinned map whose type, sizes or flags changed is reported as a *MapIncompatibleError, or
// replaced when migrate is set.
func loadObjects(spec *ebpf.CollectionSpec, pinRoot string, migrate bool, log *slog.Logger) (*bpf.EniwireObjects, error) {
	dir := filepath.Join(pinRoot, mapsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pin directory %s: %w", dir, err)
	}
	for name, m := range spec.Maps {
		if strings.HasPrefix(name, ".") {
			continue // .rodata holds configuration: per load, never shared
		}
		m.Pinning = ebpf.PinByName
		if err := checkPinnedMap(dir, name, m, migrate, log); err != nil {
			return nil, err
		}
	}
	var objs bpf.EniwireObjects
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) && strings.Contains(err.Error(), "kfunc") {
			return nil, fmt.Errorf("loading programs: %w: %w", errNoConntrackKfuncs, err)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading programs: %+v", ve)
		}
		return nil, fmt.Errorf("loading programs: %w", err)
	}
	return &objs, nil
}

// checkPinnedMap compares a pinned map with its spec before load, so a layout change is named and handled
// deliberately instead of surfacing as a load failure, or worse, a map read with the wrong layout.
func checkPinnedMap(dir, name string, spec *ebpf.MapSpec, migrate bool, log *slog.Logger) error {
	pin := filepath.Join(dir, name)
	m, err := ebpf.LoadPinnedMap(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening pinned map %s: %w", pin, err)
	}
	defer m.Close()
	cerr := spec.Compatible(m)
	if cerr == nil {
		return nil
	}
	if !migrate {
		return &MapIncompatibleError{Map: name, Pin: pin, Err: cerr}
	}
	// Unpinning leaves the old map alive for programs still attached; they move to the new map when
	// their links are updated a moment later.
	if err := m.Unpin(); err != nil {
		return fmt.Errorf("unpinning incompatible map %s: %w", pin, err)
	}
	log.Warn("replaced incompatible pinned map; its entries must be rewritten", "map", name, "pin", pin, "reason", cerr.Error())
	return nil
}
