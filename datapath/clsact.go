package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"
	"golang.org/x/sys/unix"
)

// clsact + cls_bpf, where the kernel lacks tcx. The filter is the state: ours carry the eniwire_ name
// prefix, a fixed priority and handle, and are replaced in place.

// filterPrefix marks our cls_bpf filters: the fallback touches only filters with this prefix.
const filterPrefix = "eniwire_"

func (h hook) filterName() string { return filterPrefix + h.name }

// Fixed cls_bpf identity: priority 1 runs us first; our own handle keeps other cls_bpf filters at the same
// priority untouched.
const (
	filterPriority = 1
	filterHandle   = 0xe1
)

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

// adoptFilters moves cls_bpf filters left by an earlier agent to the programs just loaded; it returns how
// many it moved.
func (d *Datapath) adoptFilters() (int, error) {
	links, err := netlinkdump.Links(nil)
	if err != nil {
		return 0, fmt.Errorf("listing interfaces: %w", err)
	}
	moved := 0
	for _, lk := range links {
		for _, h := range hooks {
			if !hasFilter(lk.Attrs().Index, h) {
				continue
			}
			if err := attachCls(h, lk.Attrs().Index, h.program(d)); err != nil {
				return moved, fmt.Errorf("updating %s on %s: %w", h.name, lk.Attrs().Name, err)
			}
			moved++
		}
	}
	return moved, nil
}

func ourFilters(ifindex int, h hook) ([]netlink.Filter, error) {
	lk, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	all, err := netlinkdump.Filters(nil, lk, h.tcParent())
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
		if fs, err := netlinkdump.Filters(nil, lk, parent); err != nil || len(fs) > 0 {
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
