package datapath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/bpf"
)

// Datapath owns every loaded object: programs and maps. Attachments live in their pins (tcx links) or
// filters (clsact) only. Close releases the process's handles; the pins keep programs attached and maps
// populated until Uninstall.
type Datapath struct {
	*Reader

	cfg  Config
	log  *slog.Logger
	objs *bpf.EniwireObjects

	mu   sync.Mutex
	mode AttachMode // resolved after the first attach when AttachAuto

	// policies owns the policy maps and the pods' policy flags (policy.go).
	policies policies

	// routesMu guards the sets the routes map is written from (routes.go).
	routesMu sync.Mutex
	vpc      []netip.Prefix
	nodeIPs  []netip.Addr
}

// Open loads the programs, reusing the maps and links pinned under cfg.PinRoot by an earlier agent,
// writes the route table from cfg, then moves the links to the new programs in place and prunes links of
// vanished interfaces: Load then Attach, for a caller with no pods or ENIs to restore first. It returns a
// *MapIncompatibleError when a pinned map's type, sizes, flags or BTF layout changed and cfg.MigrateMaps is
// off.
func Open(cfg Config) (*Datapath, error) {
	d, err := Load(cfg)
	if err != nil {
		return nil, err
	}
	if err := d.Attach(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the programs and maps held by this process. Attachments and pins stay, so packets keep
// flowing while the agent restarts.
func (d *Datapath) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.objs == nil {
		return nil
	}
	err := d.objs.Close()
	d.objs = nil
	return err
}

// Mode reports the attach mechanism in use (AttachAuto until the first attach decides it).
func (d *Datapath) Mode() AttachMode {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mode
}

// podPathVPC is bpf/maps.h's POD_PATH_VPC.
const podPathVPC = 1

// PutPod writes or replaces a pod's entry: packets from ip are accepted on its veth and leave by the ENI
// eniIfindex; packets to ip are redirected into hostIfindex's peer. The entry carries the pod's policy as
// SetPodPolicy last set it, even when that came first: a pod is isolated from its first packet.
func (d *Datapath) PutPod(ip netip.Addr, hostIfindex, eniIfindex int) error {
	return d.PutPodEntry(Pod{IP: ip, HostIfindex: hostIfindex, ENIIfindex: eniIfindex})
}

// PutPodEntry is PutPod with the pod's path (Pod.VPCOnly); p.Flags is not read (the policy sets them).
func (d *Datapath) PutPodEntry(p Pod) error {
	ip, hostIfindex, eniIfindex := p.IP, p.HostIfindex, p.ENIIfindex
	k, err := addrKey(ip)
	if err != nil {
		return fmt.Errorf("putting pod %s: %w", ip, err)
	}
	d.policies.mu.Lock()
	defer d.policies.mu.Unlock()
	v := bpf.EniwirePodValue{HostIfindex: uint32(hostIfindex), EniIfindex: uint32(eniIfindex), Flags: d.policies.podFlags(ip)}
	if p.VPCOnly {
		v.Path = podPathVPC
	}
	if err := d.objs.Pods.Put(k, v); err != nil {
		return fmt.Errorf("putting pod %s: %w", ip, err)
	}
	if v.Flags != 0 {
		// Flows judged while the address had no flags of its own are judged again.
		if err := d.nextPolicyGeneration(); err != nil {
			return fmt.Errorf("putting pod %s: %w", ip, err)
		}
	}
	d.log.Info("pod entry written", "ip", ip, "host_ifindex", hostIfindex, "eni_ifindex", eniIfindex, "vpc_only", p.VPCOnly)
	return nil
}

// DeletePod removes a pod's entry, its policy, its traffic counters and the conntrack entries of its
// address. A missing entry is not an error.
func (d *Datapath) DeletePod(ip netip.Addr) error {
	k, err := addrKey(ip)
	if err != nil {
		return fmt.Errorf("deleting pod %s: %w", ip, err)
	}
	if err := d.ClearPodPolicy(context.Background(), ip); err != nil {
		return fmt.Errorf("deleting pod %s: %w", ip, err)
	}
	if err := d.objs.Pods.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting pod %s: %w", ip, err)
	}
	if err := d.objs.PodStats.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting traffic of pod %s: %w", ip, err)
	}
	flows, err := forgetFlows(ip)
	if err != nil {
		return fmt.Errorf("deleting pod %s: %w", ip, err)
	}
	d.log.Info("pod entry deleted", "ip", ip, "conntrack_entries", flows)
	return nil
}

// AttachPodVeth attaches from_pod to a pod's host veth. It is idempotent and cheap when already attached.
func (d *Datapath) AttachPodVeth(ifindex int) error {
	return d.attach(hookFromPod, ifindex)
}

// DetachPodVeth removes from_pod from a pod's host veth; a vanished veth is not an error.
func (d *Datapath) DetachPodVeth(ifindex int) error {
	return d.detach(hookFromPod, ifindex)
}

// PutENI writes an ENI's entry (gateway, MAC, subnet) and attaches to_pod (ingress) and to_vpc (egress)
// to it. It is idempotent.
func (d *Datapath) PutENI(ifindex int, gw netip.Addr, mac net.HardwareAddr, subnet netip.Prefix) error {
	if err := d.putENIEntry(ENI{Ifindex: ifindex, Gateway: gw, MAC: mac, Subnet: subnet}); err != nil {
		return err
	}
	for _, h := range []hook{hookToPod, hookToVPC} {
		if err := d.attach(h, ifindex); err != nil {
			return fmt.Errorf("putting ENI %d: %w", ifindex, err)
		}
	}
	return nil
}

// putENIEntry writes an ENI's entry, and no more.
func (d *Datapath) putENIEntry(e ENI) error {
	gk, err := addrKey(e.Gateway)
	if err != nil {
		return fmt.Errorf("putting ENI %d: gateway: %w", e.Ifindex, err)
	}
	sk, err := routeKey(e.Subnet)
	if err != nil {
		return fmt.Errorf("putting ENI %d: subnet: %w", e.Ifindex, err)
	}
	v := bpf.EniwireEniValue{Gateway: gk, Subnet: sk.Dst, SubnetPrefixlen: uint8(sk.Prefixlen), Family: addressFamily(e.Gateway)}
	if len(e.MAC) != len(v.Mac) {
		return fmt.Errorf("putting ENI %d: MAC %q is not 6 bytes", e.Ifindex, e.MAC)
	}
	copy(v.Mac[:], e.MAC)
	if err := d.objs.Enis.Put(uint32(e.Ifindex), v); err != nil {
		return fmt.Errorf("putting ENI %d: %w", e.Ifindex, err)
	}
	d.log.Info("ENI entry written", "ifindex", e.Ifindex, "gateway", e.Gateway, "mac", e.MAC.String(), "subnet", e.Subnet)
	return nil
}

// DeleteENI detaches the ENI's programs and removes its entry. A vanished interface or entry is not an
// error.
func (d *Datapath) DeleteENI(ifindex int) error {
	for _, h := range []hook{hookToPod, hookToVPC} {
		if err := d.detach(h, ifindex); err != nil {
			return fmt.Errorf("deleting ENI %d: %w", ifindex, err)
		}
	}
	if err := d.objs.Enis.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting ENI %d: %w", ifindex, err)
	}
	d.log.Info("ENI entry deleted", "ifindex", ifindex)
	return nil
}
