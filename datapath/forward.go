package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/link"
)

// The forward hook: eniw_forward judges NetworkPolicy on the flows the host stack carries, at IPv4
// FORWARD of the node's network namespace (bpf/eniwire.c). One netfilter link, pinned as links/forward.

// forwardPinName is the forward hook's link pin; parsePinName does not take it for a tc hook's.
const forwardPinName = "forward"

// forwardPriority places eniw_forward after conntrack, kube-proxy's DNAT and the mangle table, and before
// the filter table (NF_IP_PRI_FILTER, 0): a packet it drops meets no ACCEPT of another's rules first.
const forwardPriority = -10

// attachForward attaches eniw_forward with a pinned netfilter link. A link an earlier agent pinned is
// replaced, the new one attached before the old one goes, so the hook is never without a program.
func (d *Datapath) attachForward() error {
	pin := filepath.Join(d.cfg.PinRoot, linksDir, forwardPinName)
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
	l, err := link.AttachNetfilter(link.NetfilterOptions{
		Program:        d.objs.EniwForward,
		ProtocolFamily: link.NetfilterProtoIPv4,
		Hook:           link.NetfilterInetForward,
		Priority:       forwardPriority,
	})
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
	d.log.Info("attached program", "program", "forward", "hook", "netfilter ipv4 forward")
	return nil
}

// detachForward unpins the forward hook's link, which detaches it. No pin is no error.
func detachForward(pinRoot string) error {
	_, err := unpinLink(filepath.Join(pinRoot, linksDir, forwardPinName))
	return err
}
