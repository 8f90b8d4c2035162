package datapath

import (
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
)

// hook is one program at one tc attach point. Its name is part of the bpffs API (link pins are named
// <name>-<ifindex>) and of the cls_bpf filter names, so it stays as it was when the programs took their
// eniw_ prefix.
type hook struct {
	name    string // from_pod, to_pod, to_vpc: pins, filters, logs
	egress  bool
	program func(d *Datapath) *ebpf.Program
}

var (
	hookFromPod = hook{name: "from_pod", program: func(d *Datapath) *ebpf.Program { return d.objs.EniwFromPod }}
	hookToPod   = hook{name: "to_pod", program: func(d *Datapath) *ebpf.Program { return d.objs.EniwToPod }}
	hookToVPC   = hook{name: "to_vpc", egress: true, program: func(d *Datapath) *ebpf.Program { return d.objs.EniwToVpc }}
	hooks       = []hook{hookFromPod, hookToPod, hookToVPC}
)

// progName is the kernel's name of the hook's program, as bpftool and tcx queries show it.
func (h hook) progName() string { return "eniw_" + h.name }

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

// pinName names a link pin by hook and ifindex, e.g. from_pod-12 (bpffs forbids dots).
func (h hook) pinName(ifindex int) string { return h.name + "-" + strconv.Itoa(ifindex) }

// parsePinName is the inverse of pinName.
func parsePinName(name string) (hook, int, bool) {
	for _, h := range hooks {
		rest, ok := strings.CutPrefix(name, h.name+"-")
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
