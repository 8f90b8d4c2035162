package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// attach puts a hook's program on an interface with the mechanism in use (tcx, or clsact where the kernel
// lacks it), updating an existing attachment in place so that no packet passes unprocessed, and removes
// the other mechanism's attachment so the program never runs twice.
func (d *Datapath) attach(h hook, ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mode != AttachClsact {
		fresh, err := d.attachTCX(h, ifindex)
		if err == nil {
			if d.mode == AttachAuto {
				d.mode = AttachTCX
			}
			if !fresh {
				return nil
			}
			// A cls_bpf filter left by an older agent or kernel would run the program twice.
			return deleteFilters(ifindex, h)
		}
		if d.mode == AttachTCX || !errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("attaching %s to ifindex %d with tcx: %w", h.name, ifindex, err)
		}
		d.log.Info("tcx is not supported, falling back to clsact", "error", err.Error())
		d.mode = AttachClsact
	}
	if err := attachCls(h, ifindex, h.program(d)); err != nil {
		return fmt.Errorf("attaching %s to ifindex %d with clsact: %w", h.name, ifindex, err)
	}
	return d.detachTCX(h, ifindex)
}

// detach removes a hook's program from an interface, whichever mechanism holds it. A vanished interface
// is not an error.
func (d *Datapath) detach(h hook, ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.detachTCX(h, ifindex); err != nil {
		return err
	}
	return deleteFilters(ifindex, h)
}

// adopt moves the attachments an earlier agent left (pinned tcx links, eniwire_ cls_bpf filters) to the
// programs just loaded, and settles the mode they were made with.
func (d *Datapath) adopt() error {
	n, err := d.adoptLinks()
	if err != nil {
		return err
	}
	if n > 0 {
		d.mode = AttachTCX
	}
	if d.cfg.Attach == AttachTCX {
		return nil
	}
	n, err = d.adoptFilters()
	if err != nil {
		return err
	}
	if n > 0 {
		d.mode = AttachClsact
	}
	return nil
}
