package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

var _ dptypes.PolicyDriver = (*Datapath)(nil)

// Pod flags (bpf/maps.h): the pod's policy id and its isolation.
const (
	policyIDMask     = 0x3fffffff
	egressIsolated   = 1 << 30
	ingressIsolated  = 1 << 31
	policyDirIngress = bpf.EniwirePolicyDirectionPOLICY_INGRESS
	policyDirEgress  = bpf.EniwirePolicyDirectionPOLICY_EGRESS
)

// PolicyTooLargeError is SetPodPolicy's error when a pod's policy does not fit the policy maps. The pod is
// then isolated both ways with nothing allowed (fail closed), and nothing else changed.
type PolicyTooLargeError struct {
	Pod     netip.Addr
	Entries int // the entries the policy needed
	Err     error
}

func (e *PolicyTooLargeError) Error() string {
	return fmt.Sprintf("policy of pod %s (%d map entries) does not fit the policy maps; the pod allows nothing: %v", e.Pod, e.Entries, e.Err)
}

func (e *PolicyTooLargeError) Unwrap() error { return e.Err }

// policies is the datapath's part that owns the policy maps and the policy bits of the pods map's flags.
// changeMu orders SetPodPolicy and ClearPodPolicy; mu guards the fields below and covers every write of
// the pods map (PutPod's too), so flags written by SetPodPolicy are never lost.
type policies struct {
	changeMu  sync.Mutex
	mu        sync.Mutex
	flags     map[netip.Addr]uint32 // each pod with a policy: its flags, as in its pods entry
	ids       map[uint32]*policyEntries
	byContent map[string]uint32 // pods with the same compiled policy share its id
	next      uint32
	peerSets  peerSets
	// generation is the policy generation last written to the policy_generation map (generation.go).
	generation uint32
}

// policyEntries are the map entries written under one policy id: its port sets and the peer set it names
// per direction (peersets.go).
type policyEntries struct {
	content  string // "" for ids found in the maps at load: not shared with new pods
	refs     int
	peerSets [2]uint32 // by direction; 0: none
	ports    []bpf.EniwirePolicyPortKey
}

// compiledPolicy is a PodPolicy as map entries, with policy and peer set ids 0 until allocated.
type compiledPolicy struct {
	isolation uint32
	sides     [2]compiledPeerSet // by direction
	ports     []bpf.EniwirePolicyPortKey
	allowed   []uint32 // ports[i]'s verdict: 1 allowed, 0 denied (a Deny range)
	content   string
}

// compiledPeerSet is one direction's peers as policy_peers entries.
type compiledPeerSet struct {
	peers   []bpf.EniwirePolicyPeerKey
	sets    []uint32 // peers[i]'s port set
	content string   // the peers' digest; "" when there is none
}

// egressPortSets numbers the egress port sets (bpf/maps.h POLICY_EGRESS_PORT_SETS): each direction numbers
// its own, so a peer set's entries do not depend on the other direction.
const egressPortSets = 1 << 31

// compilePolicy turns a pod's policy into map entries: one peer entry per prefix and direction, naming a
// port set; identical port lists of a direction share a set; each range is split into prefixes of its ports.
func compilePolicy(p dptypes.PodPolicy) (compiledPolicy, error) {
	var c compiledPolicy
	if p.IngressIsolated {
		c.isolation |= ingressIsolated
	}
	if p.EgressIsolated {
		c.isolation |= egressIsolated
	}
	// The content names the entries (the key pods with equal policies share an id by, and policies with
	// equal peers a peer set by); it is built with appends, not fmt, and the peers sorted as prefixes, not
	// strings: a policy of thousands of peers is compiled at every change of its peers.
	var name, content []byte
	for _, d := range []struct {
		dir   bpf.EniwirePolicyDirection
		first uint32
		peers []dptypes.PeerPorts
	}{{policyDirIngress, 1, p.Ingress}, {policyDirEgress, egressPortSets | 1, p.Egress}} {
		side := &c.sides[d.dir]
		setOf := map[string]uint32{}
		peers := withIPv4Hole(d.peers)
		slices.SortFunc(peers, func(a, b dptypes.PeerPorts) int { return comparePrefix(a.Peer, b.Peer) })
		content = content[:0]
		for _, pp := range peers {
			k, err := peerKey(d.dir, pp.Peer)
			if err != nil {
				return compiledPolicy{}, err
			}
			set := uint32(0)
			if len(pp.Ports) > 0 {
				ranges := slices.Clone(pp.Ports)
				slices.SortFunc(ranges, comparePortRange)
				name = name[:0]
				for _, r := range ranges {
					name = fmt.Appendf(name, "%d:%d-%d:%t,", r.Protocol, r.First, r.Last, r.Deny)
				}
				var ok bool
				if set, ok = setOf[string(name)]; !ok {
					set = d.first + uint32(len(setOf))
					setOf[string(name)] = set
					for _, r := range ranges {
						keys := portKeys(set, r)
						c.ports = append(c.ports, keys...)
						for range keys {
							c.allowed = append(c.allowed, verdictOf(r))
						}
					}
				}
			}
			side.peers = append(side.peers, k)
			side.sets = append(side.sets, set)
			content = appendPeerLine(content, d.dir, pp.Peer, set)
		}
		side.content = peerSetDigest(content)
	}
	content = strconv.AppendUint(content[:0], uint64(c.isolation), 16)
	for _, side := range c.sides {
		content = append(content, '|')
		content = append(content, side.content...)
	}
	for i, k := range c.ports {
		for _, v := range []uint64{uint64(k.PortSet), uint64(k.Protocol), uint64(k.Prefixlen), uint64(k.Port), uint64(c.allowed[i])} {
			content = append(content, ' ')
			content = strconv.AppendUint(content, v, 10)
		}
		content = append(content, ';')
	}
	c.content = string(content)
	return c, nil
}

// comparePrefix orders prefixes by address, then length.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

var (
	allIPv4    = netip.MustParsePrefix("0.0.0.0/0")
	mappedIPv4 = netip.MustParseAddr("::ffff:0.0.0.0")
)

// withIPv4Hole returns the peers, with an entry that allows nothing for the whole of IPv4 when an IPv6
// prefix covers the IPv4-mapped range (::/0, say) and no IPv4 /0 has its own entry: IPv4 addresses are
// stored IPv4-mapped, and an IPv6 ipBlock must not take them in.
func withIPv4Hole(peers []dptypes.PeerPorts) []dptypes.PeerPorts {
	peers = slices.Clone(peers)
	hole := false
	for _, pp := range peers {
		if pp.Peer.Masked() == allIPv4 {
			return peers
		}
		if pp.Peer.Addr().Is6() && pp.Peer.Bits() <= mappedBits && pp.Peer.Contains(mappedIPv4) {
			hole = true
		}
	}
	if hole {
		peers = append(peers, dptypes.PeerPorts{Peer: allIPv4})
	}
	return peers
}

func comparePortRange(a, b dptypes.PortRange) int {
	if a.Protocol != b.Protocol {
		return int(a.Protocol) - int(b.Protocol)
	}
	if a.First != b.First {
		return int(a.First) - int(b.First)
	}
	if a.Last != b.Last {
		return int(a.Last) - int(b.Last)
	}
	return int(verdictOf(b)) - int(verdictOf(a))
}

// verdictOf is a range's policy_ports value: 1 allowed, 0 denied.
func verdictOf(r dptypes.PortRange) uint32 {
	if r.Deny {
		return 0
	}
	return 1
}

// peerKey is a peer prefix's key, policy id 0. IPv4 prefixes are stored IPv4-mapped, as every address.
func peerKey(dir bpf.EniwirePolicyDirection, p netip.Prefix) (bpf.EniwirePolicyPeerKey, error) {
	if !p.IsValid() {
		return bpf.EniwirePolicyPeerKey{}, fmt.Errorf("invalid peer prefix %v", p)
	}
	p = p.Masked()
	return bpf.EniwirePolicyPeerKey{Prefixlen: uint32(64 + keyBits(p)), Direction: dir, Peer: bpf.EniwireIpAddr{Addr: p.Addr().As16()}}, nil
}

// portKeys are the entries of one range in a port set: AnyProtocol is one entry matching every protocol
// and port; a range of ports is split into the fewest aligned blocks, each a prefix of the 16-bit port.
func portKeys(set uint32, r dptypes.PortRange) []bpf.EniwirePolicyPortKey {
	if r.Protocol == dptypes.AnyProtocol {
		return []bpf.EniwirePolicyPortKey{{Prefixlen: 64, PortSet: set}}
	}
	var keys []bpf.EniwirePolicyPortKey
	first, last := uint32(r.First), uint32(r.Last)
	for first <= last {
		// The largest block starting at first that is aligned and stays within last.
		size := uint32(1)
		for size < 1<<16 && first%(size*2) == 0 && first+size*2-1 <= last {
			size *= 2
		}
		bits := 16
		for s := size; s > 1; s /= 2 {
			bits--
		}
		port := uint16(first)
		keys = append(keys, bpf.EniwirePolicyPortKey{
			Prefixlen: uint32(80 + bits), PortSet: set, Protocol: r.Protocol,
			Port: port>>8 | port<<8, // network order, as the program reads it
		})
		first += size
	}
	return keys
}

// SetPodPolicy makes the pod's policy p, atomically as packets see it: the entries are written under a new
// policy id (or one that pods with the same policy share), the pod's flags flip to it in one update of its
// pods entry, and the old id's entries are deleted once no pod uses them. A pod not yet in the pods map
// gets its flags with PutPod. A policy that does not fit the maps leaves the pod isolated both ways with
// nothing allowed and returns a *PolicyTooLargeError; any other failure to write also leaves it so.
func (d *Datapath) SetPodPolicy(ctx context.Context, pod netip.Addr, p dptypes.PodPolicy) error {
	if !p.Isolated() {
		return d.ClearPodPolicy(ctx, pod)
	}
	key, err := addrKey(pod)
	if err != nil {
		return fmt.Errorf("setting policy of pod %s: %w", pod, err)
	}
	c, err := compilePolicy(p)
	if err != nil {
		return fmt.Errorf("setting policy of pod %s: %w", pod, err)
	}
	ps := &d.policies
	// Changes come one at a time, in order; the map writes run outside mu, so PutPod (a CNI ADD) never
	// waits on a large policy being written.
	ps.changeMu.Lock()
	defer ps.changeMu.Unlock()
	ps.mu.Lock()
	if id, ok := ps.byContent[c.content]; ok {
		ps.ids[id].refs++
		stale, err := d.flipPolicy(pod, key, id|c.isolation)
		ps.mu.Unlock()
		d.deletePolicyEntries(stale)
		return err
	}
	id := ps.allocateID()
	// Reserved while written, no pod using it yet; the peer sets other policies wrote are taken as they are.
	e := &policyEntries{content: c.content}
	var fresh [2]*peerSetEntries
	for dir := range c.sides {
		sid, isNew := ps.peerSets.acquire(c.sides[dir])
		e.peerSets[dir] = sid
		if isNew {
			fresh[dir] = ps.peerSets.byID[sid]
		}
	}
	ps.ids[id] = e
	ps.mu.Unlock()

	werr := d.writePolicy(id, c, e, fresh)

	ps.mu.Lock()
	e.refs = 1
	if werr != nil {
		// Fail closed: isolated both ways under id 0, which holds no entry, so nothing is allowed.
		written := ps.release(id)
		stale, err := d.flipPolicy(pod, key, ingressIsolated|egressIsolated)
		ps.mu.Unlock()
		d.deletePolicyEntries(written)
		d.deletePolicyEntries(stale)
		if err != nil {
			return fmt.Errorf("setting policy of pod %s: %w (isolating it after: %w)", pod, werr, err)
		}
		d.log.Warn("pod policy does not fit; the pod allows nothing", "pod", pod, "entries", c.entries(), "err", werr)
		if errors.Is(werr, unix.ENOSPC) || errors.Is(werr, unix.E2BIG) || errors.Is(werr, unix.ENOMEM) {
			return &PolicyTooLargeError{Pod: pod, Entries: c.entries(), Err: werr}
		}
		return fmt.Errorf("setting policy of pod %s: %w", pod, werr)
	}
	ps.byContent[c.content] = id
	stale, err := d.flipPolicy(pod, key, id|c.isolation)
	ps.mu.Unlock()
	d.deletePolicyEntries(stale)
	if err != nil {
		return err
	}
	d.log.Info("pod policy set", "pod", pod, "policy_id", id, "ingress_peer_set", e.peerSets[policyDirIngress],
		"egress_peer_set", e.peerSets[policyDirEgress], "peers", len(c.sides[0].peers)+len(c.sides[1].peers),
		"new_peer_entries", fresh[0].count()+fresh[1].count(), "port_prefixes", len(c.ports))
	return nil
}

// entries is how many map entries the policy needs when no peer set of it is shared.
func (c compiledPolicy) entries() int {
	return len(c.sides[0].peers) + len(c.sides[1].peers) + len(c.ports) + 1
}

// ClearPodPolicy makes the pod not isolated and deletes its policy's entries once no pod uses them.
func (d *Datapath) ClearPodPolicy(_ context.Context, pod netip.Addr) error {
	key, err := addrKey(pod)
	if err != nil {
		return fmt.Errorf("clearing policy of pod %s: %w", pod, err)
	}
	d.policies.changeMu.Lock()
	defer d.policies.changeMu.Unlock()
	d.policies.mu.Lock()
	if _, ok := d.policies.flags[pod]; !ok {
		d.policies.mu.Unlock()
		return nil
	}
	stale, err := d.flipPolicy(pod, key, 0)
	d.policies.mu.Unlock()
	d.deletePolicyEntries(stale)
	return err
}

// writePolicy writes c's entries under id: the port sets, the peer sets new to it (fresh, by direction),
// then the policy's policy_peer_sets entry that names them. What it wrote is kept in e and the fresh sets,
// for the caller to delete on failure.
func (d *Datapath) writePolicy(id uint32, c compiledPolicy, e *policyEntries, fresh [2]*peerSetEntries) error {
	e.ports = slices.Clone(c.ports)
	portValues := make([]bpf.EniwirePolicyPortValue, len(e.ports))
	for i := range e.ports {
		e.ports[i].PolicyId = id
		portValues[i].Allowed = c.allowed[i]
	}
	if err := updateAll(d.objs.PolicyPorts, e.ports, portValues); err != nil {
		return fmt.Errorf("writing port entries of policy %d: %w", id, err)
	}
	for dir, pe := range fresh {
		if pe == nil {
			continue
		}
		if err := d.writePeerSet(e.peerSets[dir], c.sides[dir], pe); err != nil {
			return fmt.Errorf("policy %d: %w", id, err)
		}
	}
	sets := bpf.EniwirePolicyPeerSetIds{Ingress: e.peerSets[policyDirIngress], Egress: e.peerSets[policyDirEgress]}
	if err := d.objs.PolicyPeerSets.Update(id, sets, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("writing the peer sets of policy %d: %w", id, err)
	}
	return nil
}

// updateAll writes keys[i] -> values[i] into m: in batches of one syscall where the kernel has them for
// the map (a policy of thousands of peers is written at every change of its peers), else one by one.
func updateAll[K, V any](m *ebpf.Map, keys []K, values []V) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := m.BatchUpdate(keys, values, nil)
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	for i := range keys {
		if err := m.Update(keys[i], values[i], ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes keys from m, in one batch when the kernel has them for the map and every key is
// there; else one by one, a missing key no error.
func deleteAll[K any](m *ebpf.Map, keys []K) error {
	if len(keys) == 0 {
		return nil
	}
	if _, err := m.BatchDelete(keys, nil); err == nil {
		return nil
	}
	var errs []error
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// staleEntries are map entries no pod uses any more, deleted once mu is let go: a policy id's
// policy_peer_sets entry (0: none) and port sets, and the peer sets no other policy names.
type staleEntries struct {
	id    uint32
	ports []bpf.EniwirePolicyPortKey
	peers []bpf.EniwirePolicyPeerKey
}

// flipPolicy gives the pod its new flags (in its pods entry when it has one, and in memory for PutPod),
// then releases the id it had, returning that id's entries when no pod uses them any more: the caller
// deletes them once it no longer holds mu. The caller holds changeMu and mu.
func (d *Datapath) flipPolicy(pod netip.Addr, key bpf.EniwireIpAddr, flags uint32) (*staleEntries, error) {
	ps := &d.policies
	old, had := ps.flags[pod]
	var v bpf.EniwirePodValue
	switch err := d.objs.Pods.Lookup(key, &v); {
	case err == nil:
		v.Flags = flags
		if err := d.objs.Pods.Update(key, v, ebpf.UpdateExist); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, fmt.Errorf("setting policy flags of pod %s: %w", pod, err)
		}
	case !errors.Is(err, ebpf.ErrKeyNotExist):
		return nil, fmt.Errorf("reading pod %s: %w", pod, err)
	}
	if flags == 0 {
		delete(ps.flags, pod)
	} else {
		ps.flags[pod] = flags
	}
	var err error
	if old != flags {
		err = d.nextPolicyGeneration()
	}
	if !had {
		return nil, err
	}
	return ps.release(old & policyIDMask), err
}

// release drops one pod's use of a policy id and, when it was the last, forgets the id and returns its
// entries for deletion, with those of the peer sets only it named. The caller holds mu.
func (ps *policies) release(id uint32) *staleEntries {
	e, ok := ps.ids[id]
	if !ok {
		return nil
	}
	if e.refs--; e.refs > 0 {
		return nil
	}
	delete(ps.ids, id)
	if ps.byContent[e.content] == id {
		delete(ps.byContent, e.content)
	}
	st := &staleEntries{id: id, ports: e.ports}
	for _, sid := range e.peerSets {
		if pe := ps.peerSets.release(sid); pe != nil {
			st.peers = append(st.peers, pe.peers...)
		}
	}
	return st
}

// deletePolicyEntries deletes entries no pod uses (nil: none): the policy id's peer sets entry first, so
// no lookup finds a peer set part way deleted through it.
func (d *Datapath) deletePolicyEntries(st *staleEntries) {
	if st == nil {
		return
	}
	if st.id != 0 {
		if err := d.objs.PolicyPeerSets.Delete(st.id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			d.log.Warn("deleting a policy's peer sets entry", "policy_id", st.id, "err", err)
		}
	}
	if err := deleteAll(d.objs.PolicyPeers, st.peers); err != nil {
		d.log.Warn("deleting policy peer entries", "entries", len(st.peers), "err", err)
	}
	if err := deleteAll(d.objs.PolicyPorts, st.ports); err != nil {
		d.log.Warn("deleting policy port entries", "entries", len(st.ports), "err", err)
	}
}

// allocateID returns an id no policy uses, never 0. The caller holds mu.
func (ps *policies) allocateID() uint32 { return nextFreeID(&ps.next, ps.ids) }

// nextFreeID advances *next to the next id (30 bits, never 0) that used does not hold, and returns it.
func nextFreeID[V any](next *uint32, used map[uint32]V) uint32 {
	for {
		*next = (*next + 1) & policyIDMask
		if _, taken := used[*next]; *next != 0 && !taken {
			return *next
		}
	}
}

// podFlags are the flags PutPod writes for a pod. The caller holds mu.
func (ps *policies) podFlags(pod netip.Addr) uint32 { return ps.flags[pod] }

// recoverPolicies rebuilds the policy state from the maps an earlier agent left: each pod's flags (from the
// pods map, or carried from a replaced one's, carryflags.go), the entries under each id and peer set in
// use, and deletes entries of ids and peer sets no pod uses (a SetPodPolicy cut short). An id in use with
// no policy_peer_sets entry was written by an agent from before peer sets, whose policy_peers entries are
// keyed by the policy id where peer sets are now: it is given the peer set of its own number both ways.
func (d *Datapath) recoverPolicies(carried map[netip.Addr]uint32) error {
	ps := &d.policies
	ps.flags, ps.ids, ps.byContent, ps.peerSets = map[netip.Addr]uint32{}, map[uint32]*policyEntries{}, map[string]uint32{}, newPeerSets()
	var (
		k       bpf.EniwireIpAddr
		v       bpf.EniwirePodValue
		highest uint32
	)
	take := func(a netip.Addr, flags uint32) {
		if flags == 0 {
			return
		}
		ps.flags[a] = flags
		id := flags & policyIDMask
		if id == 0 {
			return // failed closed: no entries
		}
		if ps.ids[id] == nil {
			ps.ids[id] = &policyEntries{}
		}
		ps.ids[id].refs++
		highest = max(highest, id)
	}
	it := d.objs.Pods.Iterate()
	for it.Next(&k, &v) {
		take(addrFromKey(k), v.Flags)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading pods' policy flags: %w", err)
	}
	for a, flags := range carried {
		if _, ok := ps.flags[a]; !ok {
			take(a, flags)
		}
	}
	entriesOf := func(id uint32) *policyEntries {
		if e := ps.ids[id]; e != nil {
			return e
		}
		e := &policyEntries{} // refs 0: deleted below
		ps.ids[id] = e
		return e
	}
	named := map[uint32]bool{}
	var (
		id   uint32
		sets bpf.EniwirePolicyPeerSetIds
	)
	it = d.objs.PolicyPeerSets.Iterate()
	for it.Next(&id, &sets) {
		entriesOf(id).peerSets = [2]uint32{sets.Ingress, sets.Egress}
		named[id] = true
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading policies' peer sets: %w", err)
	}
	for id, e := range ps.ids {
		if e.refs > 0 && !named[id] {
			e.peerSets = [2]uint32{id, id}
			sets := bpf.EniwirePolicyPeerSetIds{Ingress: id, Egress: id}
			if err := d.objs.PolicyPeerSets.Update(id, sets, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("naming the peer sets of an earlier agent's policy %d: %w", id, err)
			}
			d.log.Info("policy of an agent from before peer sets: its peers taken as its own peer set", "policy_id", id)
		}
	}
	for _, e := range ps.ids {
		for _, sid := range e.peerSets {
			if sid == 0 {
				continue
			}
			pe := ps.peerSets.byID[sid]
			if pe == nil {
				pe = &peerSetEntries{}
				ps.peerSets.byID[sid] = pe
			}
			if e.refs > 0 {
				pe.refs++
			}
		}
	}
	read := map[uint32][]recoveredPeer{}
	var (
		pk bpf.EniwirePolicyPeerKey
		pv bpf.EniwirePolicyPeerValue
	)
	it = d.objs.PolicyPeers.Iterate()
	for it.Next(&pk, &pv) {
		pe := ps.peerSets.byID[pk.PeerSet]
		if pe == nil {
			pe = &peerSetEntries{} // refs 0: deleted below
			ps.peerSets.byID[pk.PeerSet] = pe
		}
		pe.peers = append(pe.peers, pk)
		read[pk.PeerSet] = append(read[pk.PeerSet], recoveredPeer{pk, pv.PortSet})
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading policy peers: %w", err)
	}
	if err := eachKey(d.objs.PolicyPorts, func(k bpf.EniwirePolicyPortKey) {
		e := entriesOf(k.PolicyId)
		e.ports = append(e.ports, k)
	}); err != nil {
		return fmt.Errorf("reading policy ports: %w", err)
	}
	for id, e := range ps.ids {
		if e.refs == 0 {
			delete(ps.ids, id)
			d.deletePolicyEntries(&staleEntries{id: id, ports: e.ports})
			d.log.Info("deleted the entries of a policy id no pod uses", "policy_id", id)
		}
	}
	for sid, pe := range ps.peerSets.byID {
		ps.peerSets.next = max(ps.peerSets.next, sid)
		if pe.refs == 0 {
			delete(ps.peerSets.byID, sid)
			d.deletePolicyEntries(&staleEntries{peers: pe.peers})
			d.log.Info("deleted the entries of a peer set no policy names", "peer_set", sid)
			continue
		}
		// Shared again with what the watch compiles after the restart, instead of written a second time.
		if pe.content = recoveredContent(read[sid]); pe.content != "" {
			if _, taken := ps.peerSets.byContent[pe.content]; !taken {
				ps.peerSets.byContent[pe.content] = sid
			}
		}
	}
	ps.next = highest
	// An earlier agent may have stopped between a flip and its generation: established flows are judged
	// again.
	if err := d.objs.PolicyGeneration.Lookup(uint32(0), &ps.generation); err != nil {
		return fmt.Errorf("reading the policy generation: %w", err)
	}
	return d.nextPolicyGeneration()
}

// eachKey calls fn with every key of m.
func eachKey[K any](m *ebpf.Map, fn func(K)) error {
	var (
		k K
		v = make([]byte, m.ValueSize())
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		fn(k)
	}
	return it.Err()
}
