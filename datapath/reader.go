package datapath

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/bpf"
)

// Reader reads the datapath's maps. Datapath embeds one; OpenPinnedReadOnly gives one to another process
// (eniwirectl, a test) from the pins alone, without loading programs or taking write access.
type Reader struct {
	pods, enis, routes, counters, podStats *ebpf.Map
	owned                                  bool // Close closes the maps only when the Reader opened them
}

// OpenPinnedReadOnly opens the pinned maps under pinRoot (Config.PinRoot) read-only.
func OpenPinnedReadOnly(pinRoot string) (*Reader, error) {
	r := &Reader{owned: true}
	dir := filepath.Join(pinRoot, mapsDir)
	for _, m := range []struct {
		name string
		dst  **ebpf.Map
	}{
		{bpf.EniwireMapPods, &r.pods},
		{bpf.EniwireMapEnis, &r.enis},
		{bpf.EniwireMapRoutes, &r.routes},
		{bpf.EniwireMapCounters, &r.counters},
		{bpf.EniwireMapPodStats, &r.podStats},
	} {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(dir, m.name), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("opening pinned map %s: %w", m.name, err)
		}
		*m.dst = mp
	}
	return r, nil
}

// Close releases the maps of a Reader from OpenPinnedReadOnly. The pins stay.
func (r *Reader) Close() error {
	if !r.owned {
		return nil
	}
	var errs []error
	for _, m := range []*ebpf.Map{r.pods, r.enis, r.routes, r.counters, r.podStats} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// Pods lists the pods map.
func (r *Reader) Pods() ([]Pod, error) {
	var (
		k   bpf.EniwireIpAddr
		v   bpf.EniwirePodValue
		out []Pod
	)
	it := r.pods.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Pod{IP: addrFromKey(k), HostIfindex: int(v.HostIfindex), ENIIfindex: int(v.EniIfindex), Flags: v.Flags,
			VPCOnly: v.Path&podPathVPC != 0})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterating pods: %w", err)
	}
	return out, nil
}

// ENIs lists the enis map.
func (r *Reader) ENIs() ([]ENI, error) {
	var (
		k   uint32
		v   bpf.EniwireEniValue
		out []ENI
	)
	it := r.enis.Iterate()
	for it.Next(&k, &v) {
		out = append(out, eniFromValue(int(k), v))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterating ENIs: %w", err)
	}
	return out, nil
}

func eniFromValue(ifindex int, v bpf.EniwireEniValue) ENI {
	return ENI{
		Ifindex: ifindex,
		Gateway: addrFromKey(v.Gateway),
		MAC:     net.HardwareAddr(append([]byte(nil), v.Mac[:]...)),
		Subnet:  prefixFromRouteKey(bpf.EniwireRouteKey{Prefixlen: uint32(v.SubnetPrefixlen), Dst: v.Subnet}),
	}
}

// Routes lists the routes map (VPC CIDRs and host destinations).
func (r *Reader) Routes() ([]Route, error) {
	var (
		k   bpf.EniwireRouteKey
		v   bpf.EniwireRouteValue
		out []Route
	)
	it := r.routes.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Route{Prefix: prefixFromRouteKey(k), Kind: RouteKind(v.Kind)})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterating routes: %w", err)
	}
	return out, nil
}

// Counters sums the per-CPU verdict counters, one Counter per verdict in verdict order.
func (r *Reader) Counters() ([]Counter, error) {
	out := make([]Counter, 0, numVerdicts)
	var perCPU []bpf.EniwireCounter
	for i := range numVerdicts {
		if err := r.counters.Lookup(uint32(i), &perCPU); err != nil {
			return nil, fmt.Errorf("reading counter %s: %w", Verdict(i), err)
		}
		c := Counter{Verdict: Verdict(i)}
		for _, v := range perCPU {
			c.Packets += v.Packets
			c.Bytes += v.Bytes
		}
		out = append(out, c)
	}
	return out, nil
}

// Counter returns one verdict's counter.
func (r *Reader) Counter(v Verdict) (Counter, error) {
	all, err := r.Counters()
	if err != nil {
		return Counter{}, err
	}
	if int(v) >= len(all) {
		return Counter{}, fmt.Errorf("verdict %d out of range", v)
	}
	return all[v], nil
}

// PodTraffic sums the per-CPU traffic of every pod that has sent or received a packet.
func (r *Reader) PodTraffic() ([]PodTraffic, error) {
	var (
		k      bpf.EniwireIpAddr
		perCPU []bpf.EniwirePodTraffic
		out    []PodTraffic
	)
	it := r.podStats.Iterate()
	for it.Next(&k, &perCPU) {
		t := PodTraffic{IP: addrFromKey(k)}
		for _, v := range perCPU {
			t.TxPackets += v.TxPackets
			t.TxBytes += v.TxBytes
			t.RxPackets += v.RxPackets
			t.RxBytes += v.RxBytes
		}
		out = append(out, t)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterating pod traffic: %w", err)
	}
	return out, nil
}
