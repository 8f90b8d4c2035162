package nodenet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Attach finishes Open: it writes the map entries of the ENIs and pods the caller's journal holds, then moves
// the links an earlier agent left to the programs Open loaded (datapath's Restore, then Attach). When an
// upgrade replaced the pods or enis map (its layout changed), the new programs so find every live pod: none of
// its packets is dropped as spoofed in between. Only entries are written; the controller's start brings the
// ENIs and pods fully up as usual. An ENI or pod whose interface is gone is left to the controller.
func (b *BPF) Attach(_ context.Context, enis []dptypes.ENI, pods []dptypes.Pod) error {
	var (
		eniEntries []datapath.ENI
		podEntries []datapath.Pod
		skipped    []error
	)
	for _, e := range enis {
		l, err := linkByMAC(e.MAC)
		if err == nil {
			var entry datapath.ENI
			if entry, err = eniEntry(e, l); err == nil {
				eniEntries = append(eniEntries, entry)
				continue
			}
		}
		skipped = append(skipped, fmt.Errorf("ENI %s: %w", e.ID, err))
	}
	for _, p := range pods {
		entry, err := podEntry(p)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("pod %s: %w", p.IP, err))
			continue
		}
		podEntries = append(podEntries, entry)
	}
	if len(skipped) > 0 {
		b.log.Info("restoring datapath entries: some left to the controller", "skipped", errors.Join(skipped...).Error())
	}
	if err := b.dp.Restore(eniEntries, podEntries); err != nil {
		return fmt.Errorf("restoring the datapath before attaching: %w", err)
	}
	if err := b.dp.Attach(); err != nil {
		return fmt.Errorf("attaching the BPF datapath: %w", err)
	}
	return nil
}

// eniEntry is an ENI's map entry, from its interface l on the node.
func eniEntry(e dptypes.ENI, l netlink.Link) (datapath.ENI, error) {
	gw, err := netip.ParseAddr(e.Gateway)
	if err != nil {
		return datapath.ENI{}, fmt.Errorf("gateway %q: %w", e.Gateway, err)
	}
	subnet, err := netip.ParsePrefix(e.SubnetCIDR)
	if err != nil {
		return datapath.ENI{}, fmt.Errorf("subnet %q: %w", e.SubnetCIDR, err)
	}
	return datapath.ENI{Ifindex: l.Attrs().Index, Gateway: gw, MAC: l.Attrs().HardwareAddr, Subnet: subnet}, nil
}

// podEntry is a pod's map entry: its address, and its host veth's and its ENI's interfaces on the node.
func podEntry(pod dptypes.Pod) (datapath.Pod, error) {
	ip, err := netip.ParseAddr(pod.IP)
	if err != nil {
		return datapath.Pod{}, err
	}
	host, ok, err := hostIfindex(pod)
	if err != nil {
		return datapath.Pod{}, err
	}
	if !ok {
		return datapath.Pod{}, fmt.Errorf("host veth %q is gone", pod.HostVeth)
	}
	eni, err := linkByMAC(pod.ENI.MAC)
	if err != nil {
		return datapath.Pod{}, fmt.Errorf("ENI %s: %w", pod.ENI.ID, err)
	}
	return datapath.Pod{IP: ip, HostIfindex: host, ENIIfindex: eni.Attrs().Index}, nil
}
