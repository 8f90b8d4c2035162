package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/link"
)

// tcx links. The pin is the only state of an attachment: to change one, the pinned link is opened and
// updated, and every handle is closed once the link is pinned. A link whose interface went away (a deleted
// veth leaves its pin behind, detached) is unpinned and, when asked for, attached anew.
//
// Anchor: eniwire's programs attach at the head of the interface's tcx chain (link.Head()). They decide
// where a packet goes next (a redirect ends the chain, as any forwarding does), so they run first and
// their decision does not depend on what else was attached before; every packet they pass on returns
// tcx "next" (TC_ACT_UNSPEC), so programs attached after them (a network policy agent, an observability
// tool) still see it. Updating a pinned link keeps its place in the chain.

// attachTCX attaches a hook's program to ifindex with a pinned tcx link, or moves the pinned link to the
// program when it already holds the interface; fresh says a link was created.
func (d *Datapath) attachTCX(h hook, ifindex int) (fresh bool, err error) {
	pin := filepath.Join(d.cfg.PinRoot, linksDir, h.pinName(ifindex))
	l, err := link.LoadPinnedLink(pin, nil)
	switch {
	case err == nil:
		defer l.Close()
		if linkHolds(l, ifindex) {
			if err := l.Update(h.program(d)); err != nil {
				return false, fmt.Errorf("updating pinned link %s: %w", pin, err)
			}
			return false, nil
		}
		// The interface went away and its index came back: attach afresh.
		if err := l.Unpin(); err != nil {
			return false, fmt.Errorf("unpinning stale link %s: %w", pin, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
	l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: h.program(d), Attach: h.tcxType(), Anchor: link.Head()})
	if err != nil {
		return false, err
	}
	defer l.Close()
	if err := l.Pin(pin); err != nil {
		return false, fmt.Errorf("pinning link %s: %w", pin, err)
	}
	d.log.Info("attached program", "program", h.name, "ifindex", ifindex, "mode", "tcx")
	return true, nil
}

// linkHolds reports whether a tcx link is attached to ifindex.
func linkHolds(l link.Link, ifindex int) bool {
	info, err := l.Info()
	return err == nil && info.TCX() != nil && int(info.TCX().Ifindex) == ifindex
}

// detachTCX unpins a hook's link on ifindex; dropping the last reference detaches it. No pin is no error.
func (d *Datapath) detachTCX(h hook, ifindex int) error {
	found, err := unpinLink(filepath.Join(d.cfg.PinRoot, linksDir, h.pinName(ifindex)))
	if found {
		d.log.Info("detached program", "program", h.name, "ifindex", ifindex, "mode", "tcx")
	}
	return err
}

// unpinLink unpins the link pinned at pin, which detaches it once no one else holds it, and says whether
// there was one.
func unpinLink(pin string) (bool, error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return true, fmt.Errorf("unpinning link %s: %w", pin, err)
	}
	return true, nil
}

// adoptLinks moves the links pinned by an earlier agent to the programs just loaded, and unpins those
// whose interface has gone. It returns how many it moved.
func (d *Datapath) adoptLinks() (int, error) {
	dir := filepath.Join(d.cfg.PinRoot, linksDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("creating pin directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", dir, err)
	}
	moved := 0
	for _, e := range entries {
		h, ifindex, ok := parsePinName(e.Name())
		if !ok {
			continue // not ours to judge
		}
		pin := filepath.Join(dir, e.Name())
		l, err := link.LoadPinnedLink(pin, nil)
		if err != nil {
			return moved, fmt.Errorf("opening pinned link %s: %w", pin, err)
		}
		if !linkHolds(l, ifindex) {
			d.log.Info("removed link of a vanished interface", "program", h.name, "ifindex", ifindex)
			_ = l.Unpin()
			_ = l.Close()
			continue
		}
		err = l.Update(h.program(d))
		_ = l.Close()
		if err != nil {
			return moved, fmt.Errorf("updating pinned link %s: %w", pin, err)
		}
		moved++
	}
	return moved, nil
}

// pinnedLinks counts the link pins of ours under pinRoot.
func pinnedLinks(pinRoot string) int {
	entries, _ := os.ReadDir(filepath.Join(pinRoot, linksDir))
	n := 0
	for _, e := range entries {
		if _, _, ok := parsePinName(e.Name()); ok {
			n++
		}
	}
	return n
}
