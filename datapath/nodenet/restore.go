package nodenet

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Attach finishes Open: it writes the map entries of the ENIs and pods the caller's journal holds, then moves
// the links an earlier agent left to the programs Open loaded (datapath's Restore, then Attach). When an
// upgrade replaced the pods or enis map (its layout changed), the new programs so find every live pod: none of
// its packets is dropped as spoofed in between. Only entries are written; the controller's start brings the
// ENIs and pods fully up as usual. An ENI or pod whose interface is gone is left to the controller.
func (b *BPF) Attach(ctx context.Context, enis []dptypes.ENI, pods []dptypes.Pod) error {
	var (
		eniEntries []datapath.ENI
		restored   []datapath.Pod
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
		entries, err := podEntries(p)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("pod %s: %w", p.IP, err))
			continue
		}
		if err := b.followPod(ctx, p); err != nil {
			return fmt.Errorf("restoring pod %s: %w", p.IP, err)
		}
		restored = append(restored, entries...)
	}
	if len(skipped) > 0 {
		b.log.Info("restoring datapath entries: some left to the controller", "skipped", errors.Join(skipped...).Error())
	}
	if err := b.dp.Restore(eniEntries, restored); err != nil {
		return fmt.Errorf("restoring the datapath before attaching: %w", err)
	}
	if err := b.dp.Attach(); err != nil {
		return fmt.Errorf("attaching the BPF datapath: %w", err)
	}
	return nil
}

var (
	// errNoSubnet means an ENI came without its subnet or gateway: the programs could not route by it.
	errNoSubnet = errors.New("no subnet or gateway")
	// errNoPodIP means a pod came without an address.
	errNoPodIP = errors.New("no valid pod address")
)

// eniEntry is an ENI's map entry, from its interface l on the node.
func eniEntry(e dptypes.ENI, l netlink.Link) (datapath.ENI, error) {
	if !e.Gateway.IsValid() || !e.Subnet.IsValid() {
		return datapath.ENI{}, fmt.Errorf("ENI %s: gateway %s, subnet %s: %w", e.ID, e.Gateway, e.Subnet, errNoSubnet)
	}
	return datapath.ENI{Ifindex: l.Attrs().Index, Gateway: e.Gateway, MAC: l.Attrs().HardwareAddr, Subnet: e.Subnet}, nil
}

// podEntries are a pod's map entries: its address, and its host veth's and its ENI's interfaces on the node;
// a dual-stack pod's IPv6 address beside it, on the same veth and with the ENI of its /80 (the primary); an
// IPv6 pod's IPv4 egress address beside it, on the same veth and with no ENI (from_pod hands what it sends to
// the host, which translates it to the node's IPv4).
func podEntries(pod dptypes.Pod) ([]datapath.Pod, error) {
	if !pod.IP.IsValid() {
		return nil, errNoPodIP
	}
	host, ok, err := hostIfindex(pod)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("host veth %q is gone", pod.HostVeth)
	}
	eni, err := linkByMAC(pod.ENI.MAC)
	if err != nil {
		return nil, fmt.Errorf("ENI %s: %w", pod.ENI.ID, err)
	}
	entries := []datapath.Pod{{IP: pod.IP, HostIfindex: host, ENIIfindex: eni.Attrs().Index, VPCOnly: pod.VPCOnly}}
	if pod.IPv6.IsValid() {
		eni6, err := linkByMAC(pod.IPv6ENI.MAC)
		if err != nil {
			return nil, fmt.Errorf("ENI %s of IPv6 %s: %w", pod.IPv6ENI.ID, pod.IPv6, err)
		}
		entries = append(entries, datapath.Pod{IP: pod.IPv6, HostIfindex: host, ENIIfindex: eni6.Attrs().Index})
	}
	if pod.EgressIP.IsValid() {
		entries = append(entries, datapath.Pod{IP: pod.EgressIP, HostIfindex: host})
	}
	return entries, nil
}
