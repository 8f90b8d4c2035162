package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/link"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// Uninstall detaches every program of ours (pinned tcx links and the forward hook's netfilter link under
// pinRoot, and eniwire_ cls_bpf filters on the interfaces of the calling network namespace) and unpins our maps, then removes the pin
// directories if they are empty. Pins and filters of others are left alone. Running it twice is fine.
func Uninstall(pinRoot string) error {
	if pinRoot == "" {
		pinRoot = DefaultPinRoot
	}
	var errs []error
	linkDir := filepath.Join(pinRoot, linksDir)
	entries, err := os.ReadDir(linkDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("listing %s: %w", linkDir, err))
	}
	for _, e := range entries {
		if _, _, ok := parsePinName(e.Name()); !ok {
			continue
		}
		pin := filepath.Join(linkDir, e.Name())
		l, err := link.LoadPinnedLink(pin, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("opening pinned link %s: %w", pin, err))
			continue
		}
		errs = append(errs, l.Unpin(), l.Close())
	}

	if err := detachForward(pinRoot); err != nil {
		errs = append(errs, err)
	}

	ifaces, err := netlinkdump.Links(nil)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing interfaces: %w", err))
	}
	for _, lk := range ifaces {
		for _, h := range hooks {
			if err := deleteFilters(lk.Attrs().Index, h); err != nil {
				errs = append(errs, err)
			}
		}
	}

	mapDir := filepath.Join(pinRoot, mapsDir)
	for _, name := range append([]string{bpf.EniwireMapPods, bpf.EniwireMapEnis, bpf.EniwireMapRoutes,
		bpf.EniwireMapCounters, bpf.EniwireMapPodStats, bpf.EniwireMapPolicyPeers, bpf.EniwireMapPolicyPeerSets, bpf.EniwireMapPolicyPorts, bpf.EniwireMapPolicyGeneration, bpf.EniwireMapPolicyDenials,
		bpf.EniwireMapDenialBudgets}, retiredMaps...) {
		if err := os.Remove(filepath.Join(mapDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning map %s: %w", name, err))
		}
	}
	// Only empty directories go: anything left in them is not ours.
	for _, dir := range []string{linkDir, mapDir, pinRoot, filepath.Dir(pinRoot)} {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uninstalling datapath at %s: %w", pinRoot, err)
	}
	return nil
}
