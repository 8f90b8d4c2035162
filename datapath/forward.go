package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cilium/ebpf/link"
)

// The forward hook: eniw_forward judges NetworkPolicy on the flows the host stack carries, at IPv4 and IPv6
// FORWARD of the node's network namespace (bpf/eniwire.c). One netfilter link per family, pinned as
// links/forward and links/forward6.

// forwardHooks are the forward hook's links: their pins (which parsePinName does not take for a tc
// hook's) and families.
var forwardHooks = []struct {
	pin    string
	family link.NetfilterProtocolFamily
	name   string
}{
	{"forward", link.NetfilterProtoIPv4, "netfilter ipv4 forward"},
	{"forward6", link.NetfilterProtoIPv6, "netfilter ipv6 forward"},
}

// forwardPriorities place eniw_forward after conntrack, kube-proxy's DNAT and the mangle table, and before
// the filter table (NF_IP_PRI_FILTER, 0): a packet it drops meets no ACCEPT of another's rules first. The
// kernel takes one BPF program per hook and priority, so a new agent links its own at the other of two
// neighbouring priorities while the earlier agent's link still holds one; both sit between DNAT and filter.
var forwardPriorities = [2]int{-10, -11}

// attachForward attaches eniw_forward with a pinned netfilter link per family.
func (d *Datapath) attachForward() error {
	for _, h := range forwardHooks {
		if err := d.attachForwardFamily(h.pin, h.family, h.name); err != nil {
			return err
		}
	}
	return nil
}

// attachForwardFamily attaches eniw_forward at one family's FORWARD hook. A link an earlier agent pinned
// is replaced, the new one attached before the old one goes, so the hook is never without a program.
func (d *Datapath) attachForwardFamily(pinName string, family link.NetfilterProtocolFamily, hookName string) error {
	pin := filepath.Join(d.cfg.PinRoot, linksDir, pinName)
	old, err := link.LoadPinnedLink(pin, nil)
	switch {
	case err == nil:
		defer old.Close()
		if info, err := old.Info(); err == nil {
			if pi, err := d.objs.EniwForward.Info(); err == nil {
				if id, ok := pi.ID(); ok && id == info.Program {
					return nil
				}
			}
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
	var l link.Link
	for _, priority := range forwardPriorities {
		l, err = link.AttachNetfilter(link.NetfilterOptions{
			Program:        d.objs.EniwForward,
			ProtocolFamily: family,
			Hook:           link.NetfilterInetForward,
			Priority:       int32(priority),
		})
		if !errors.Is(err, syscall.EBUSY) {
			break // attached, or refused for another reason; EBUSY: the earlier agent's link holds this one
		}
	}
	if err != nil {
		return fmt.Errorf("attaching the forward hook: %w", err)
	}
	defer l.Close()
	if old != nil {
		if err := old.Unpin(); err != nil {
			return fmt.Errorf("unpinning the earlier forward hook %s: %w", pin, err)
		}
	}
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pinning link %s: %w", pin, err)
	}
	d.log.Info("attached program", "program", "forward", "hook", hookName)
	return nil
}

// detachForward unpins the forward hook's links, which detaches them. No pin is no error.
func detachForward(pinRoot string) error {
	var errs []error
	for _, h := range forwardHooks {
		_, err := unpinLink(filepath.Join(pinRoot, linksDir, h.pin))
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
