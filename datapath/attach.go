package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// hook is one program at one tc attach point.
type hook struct {
	prog    string // program name, also the prefix of its link pins
	egress  bool
	program func(d *Datapath) *ebpf.Program
}

var (
	hookFromPod = hook{prog: "from_pod", program: func(d *Datapath) *ebpf.Program { return d.objs.FromPod }}
	hookToPod   = hook{prog: "to_pod", program: func(d *Datapath) *ebpf.Program { return d.objs.ToPod }}
	hookToVPC   = hook{prog: "to_vpc", egress: true, program: func(d *Datapath) *ebpf.Program { return d.objs.ToVpc }}
	hooks       = []hook{hookFromPod, hookToPod, hookToVPC}
)

func (h hook) tcxType() ebpf.AttachType {
	if h.egress {
		return ebpf.AttachTCXEgress
	}
	return ebpf.AttachTCXIngress
}

func (h hook) tcParent() uint32 {
	if h.egress {
		return netlink.HANDLE_MIN_EGRESS
	}
	return netlink.HANDLE_MIN_INGRESS
}

// filterName marks our cls_bpf filters: the fallback touches only filters with this prefix.
const filterPrefix = "eniwire_"

func (h hook) filterName() string { return filterPrefix + h.prog }

// pinName names a link pin by program and ifindex, e.g. from_pod-12 (bpffs forbids dots).
func (h hook) pinName(ifindex int) string { return h.prog + "-" + strconv.Itoa(ifindex) }

// parsePinName is the inverse of pinName.
func parsePinName(name string) (hook, int, bool) {
	for _, h := range hooks {
		rest, ok := strings.CutPrefix(name, h.prog+"-")
		if !ok {
			continue
		}
		ifindex, err := strconv.Atoi(rest)
		if err != nil || ifindex <= 0 {
			return hook{}, 0, false
		}
		return h, ifindex, true
	}
	return hook{}, 0, false
}

// Fixed cls_bpf identity: priority 1 runs us first; our own handle keeps other cls_bpf filters at the same
// priority untouched.
const (
	filterPriority = 1
	filterHandle   = 0xe1
)

// attach puts a program on an interface, updating the existing attachment in place when there is one so
// that no packet passes unprocessed.
func (d *Datapath) attach(h hook, ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	mode := d.mode
	if mode != AttachClsact {
		fresh, err := d.attachTCX(h, ifindex)
		if err == nil {
			if mode == AttachAuto {
				d.mode = AttachTCX
			}
			if !fresh {
				return nil
			}
			// A cls_bpf filter left by an older agent or kernel would run the program twice.
			return deleteFilters(ifindex, h)
		}
		if mode == AttachTCX || !errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("attaching %s to ifindex %d with tcx: %w", h.prog, ifindex, err)
		}
		d.log.Info("tcx is not supported, falling back to clsact", "error", err.Error())
		d.mode = AttachClsact
	}
	if err := attachCls(h, ifindex, h.program(d)); err != nil {
		return fmt.Errorf("attaching %s to ifindex %d with clsact: %w", h.prog, ifindex, err)
	}
	return d.unpinLink(h, ifindex)
}

// attachTCX attaches with a pinned tcx link, or updates the link we hold; fresh says it was created.
func (d *Datapath) attachTCX(h hook, ifindex int) (fresh bool, err error) {
	pin := filepath.Join(d.cfg.PinRoot, linksDir, h.pinName(ifindex))
	if l, ok := d.links[pin]; ok {
		if info, err := l.Info(); err == nil && info.TCX() != nil && int(info.TCX().Ifindex) == ifindex {
			return false, l.Update(h.program(d))
		}
		// The interface went away and its index came back; attach afresh.
		_ = l.Unpin()
		_ = l.Close()
		delete(d.links, pin)
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: h.program(d), Attach: h.tcxType()})
	if err != nil {
		return false, err
	}
	if err := l.Pin(pin); err != nil {
		_ = l.Close()
		return false, fmt.Errorf("pinning link %s: %w", pin, err)
	}
	d.links[pin] = l
	d.log.Info("attached program", "program", h.prog, "ifindex", ifindex, "mode", "tcx")
	return true, nil
}

// adoptLinks reopens the links pinned by an earlier agent and moves them to the programs just loaded.
// Links whose interface has gone are unpinned: a deleted veth detaches its tcx links but not their pins.
func (d *Datapath) adoptLinks() error {
	dir := filepath.Join(d.cfg.PinRoot, linksDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating pin directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		pin := filepath.Join(dir, e.Name())
		h, ifindex, ok := parsePinName(e.Name())
		if !ok {
			continue // not ours to judge
		}
		l, err := link.LoadPinnedLink(pin, nil)
		if err != nil {
			return fmt.Errorf("opening pinned link %s: %w", pin, err)
		}
		info, err := l.Info()
		if err != nil || info.TCX() == nil || int(info.TCX().Ifindex) != ifindex {
			d.log.Info("removed link of a vanished interface", "program", h.prog, "ifindex", ifindex)
			_ = l.Unpin()
			_ = l.Close()
			continue
		}
		if err := l.Update(h.program(d)); err != nil {
			_ = l.Close()
			return fmt.Errorf("updating pinned link %s: %w", pin, err)
		}
		d.links[pin] = l
		d.mode = AttachTCX
	}
	return nil
}

// adoptFilters moves cls_bpf filters left by an earlier agent to the programs just loaded.
func (d *Datapath) adoptFilters() error {
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	for _, lk := range links {
		for _, h := range hooks {
			if !hasFilter(lk.Attrs().Index, h) {
				continue
			}
			if err := attachCls(h, lk.Attrs().Index, h.program(d)); err != nil {
				return fmt.Errorf("updating %s on %s: %w", h.prog, lk.Attrs().Name, err)
			}
			d.mode = AttachClsact
		}
	}
	return nil
}

// detach removes a program from an interface, whichever mechanism holds it. A vanished interface is not
// an error.
func (d *Datapath) detach(h hook, ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.unpinLink(h, ifindex); err != nil {
		return err
	}
	return deleteFilters(ifindex, h)
}

func (d *Datapath) unpinLink(h hook, ifindex int) error {
	pin := filepath.Join(d.cfg.PinRoot, linksDir, h.pinName(ifindex))
	l, ok := d.links[pin]
	if !ok {
		var err error
		l, err = link.LoadPinnedLink(pin, nil)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("opening pinned link %s: %w", pin, err)
		}
	}
	delete(d.links, pin)
	// Unpinning and closing the last reference detaches a tcx link.
	if err := l.Unpin(); err != nil {
		_ = l.Close()
		return fmt.Errorf("unpinning link %s: %w", pin, err)
	}
	d.log.Info("detached program", "program", h.prog, "ifindex", ifindex, "mode", "tcx")
	return l.Close()
}

func attachCls(h hook, ifindex int, prog *ebpf.Program) error {
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscAdd(qdisc); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("adding clsact qdisc: %w", err)
	}
	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: ifindex,
			Parent:    h.tcParent(),
			Handle:    filterHandle,
			Priority:  filterPriority,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           prog.FD(),
		Name:         h.filterName(),
		DirectAction: true,
	}
	if err := netlink.FilterReplace(filter); err != nil {
		return fmt.Errorf("replacing cls_bpf filter: %w", err)
	}
	return nil
}

func ourFilters(ifindex int, h hook) ([]netlink.Filter, error) {
	lk, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	all, err := netlink.FilterList(lk, h.tcParent())
	if err != nil {
		return nil, err
	}
	var ours []netlink.Filter
	for _, f := range all {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == h.filterName() {
			ours = append(ours, f)
		}
	}
	return ours, nil
}

func hasFilter(ifindex int, h hook) bool {
	fs, err := ourFilters(ifindex, h)
	return err == nil && len(fs) > 0
}

// deleteFilters removes our cls_bpf filters of one hook, then the clsact qdisc if nothing else uses it.
func deleteFilters(ifindex int, h hook) error {
	fs, err := ourFilters(ifindex, h)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing filters of ifindex %d: %w", ifindex, err)
	}
	if len(fs) == 0 {
		return nil
	}
	for _, f := range fs {
		if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("deleting filter %s of ifindex %d: %w", h.filterName(), ifindex, err)
		}
	}
	return deleteEmptyClsact(ifindex)
}

func deleteEmptyClsact(ifindex int) error {
	lk, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		if fs, err := netlink.FilterList(lk, parent); err != nil || len(fs) > 0 {
			return nil // someone else's filters, or unknown: leave the qdisc
		}
	}
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscDel(qdisc); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("deleting empty clsact qdisc of ifindex %d: %w", ifindex, err)
	}
	return nil
}
