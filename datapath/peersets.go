package datapath

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/eniwire/eniwire/bpf"
)

// A peer set is one direction's peers of a policy as policy_peers entries, each naming a port set of the
// policy (bpf/maps.h). It is written once for every policy whose peers in that direction are the same, and
// each policy names its two in policy_peer_sets: the workloads of a namespace allowing the same 5,000 pods
// on their own ports hold one copy of those pods, not one each (docs/benchmarks.md, policy capacity).

// peerSets are the peer sets written, shared by content. The caller holds the policies' changeMu and mu.
type peerSets struct {
	byID      map[uint32]*peerSetEntries
	byContent map[string]uint32
	next      uint32
}

// peerSetEntries are the policy_peers entries of one peer set, and how many policy ids name it.
type peerSetEntries struct {
	content string // its digest (peerSetDigest); sets found in the maps at load get theirs back (recoveredContent)
	refs    int
	peers   []bpf.EniwirePolicyPeerKey
}

func newPeerSets() peerSets {
	return peerSets{byID: map[uint32]*peerSetEntries{}, byContent: map[string]uint32{}}
}

// acquire takes a reference to the peer set with side's content, reserving a new id when there is none:
// fresh says its entries are still to be written (writePeerSet). A side without peers is set 0, which
// holds nothing.
func (s *peerSets) acquire(side compiledPeerSet) (id uint32, fresh bool) {
	if side.content == "" {
		return 0, false
	}
	if id, ok := s.byContent[side.content]; ok {
		s.byID[id].refs++
		return id, false
	}
	id = nextFreeID(&s.next, s.byID)
	s.byID[id] = &peerSetEntries{content: side.content, refs: 1}
	s.byContent[side.content] = id
	return id, true
}

// release drops one policy's reference to a peer set and returns its entries for deletion when it was the
// last.
func (s *peerSets) release(id uint32) *peerSetEntries {
	e, ok := s.byID[id]
	if !ok {
		return nil
	}
	if e.refs--; e.refs > 0 {
		return nil
	}
	delete(s.byID, id)
	if s.byContent[e.content] == id {
		delete(s.byContent, e.content)
	}
	return e
}

// writePeerSet writes side's entries under peer set id, keeping their keys in e for their deletion (even
// those of a write that failed part way).
func (d *Datapath) writePeerSet(id uint32, side compiledPeerSet, e *peerSetEntries) error {
	keys := slices.Clone(side.peers)
	values := make([]bpf.EniwirePolicyPeerValue, len(keys))
	for i := range keys {
		keys[i].PeerSet = id
		values[i].PortSet = side.sets[i]
	}
	e.peers = keys
	if err := updateAll(d.objs.PolicyPeers, keys, values); err != nil {
		return fmt.Errorf("writing the %d entries of peer set %d: %w", len(keys), id, err)
	}
	return nil
}

// count is how many entries the set holds (0 for nil).
func (e *peerSetEntries) count() int {
	if e == nil {
		return 0
	}
	return len(e.peers)
}

// appendPeerLine appends one peer entry to a peer set's content: direction, prefix, port set. The peers
// come sorted by prefix (comparePrefix), so equal sets have equal contents.
func appendPeerLine(content []byte, dir bpf.EniwirePolicyDirection, peer netip.Prefix, set uint32) []byte {
	content = strconv.AppendUint(content, uint64(dir), 10)
	content = append(content, ' ')
	content = peer.Masked().AppendTo(content)
	content = append(content, ' ')
	content = strconv.AppendUint(content, uint64(set), 10)
	return append(content, ';')
}

// peerSetDigest names a peer set by its content's digest ("" for no peer): a set of thousands of peers is
// named by every policy that shares it.
func peerSetDigest(content []byte) string {
	if len(content) == 0 {
		return ""
	}
	sum := sha256.Sum256(content)
	return string(sum[:])
}

// recoveredPeer is a policy_peers entry read back at load.
type recoveredPeer struct {
	key bpf.EniwirePolicyPeerKey
	set uint32
}

// recoveredContent is the content a peer set read back from the maps was compiled from: each entry's
// prefix as the compiler names it (an IPv4-mapped key of 96 bits or more is the IPv4 prefix: peerKey of
// it gives the same key), so a policy compiled after a restart with the same peers shares the set again.
func recoveredContent(entries []recoveredPeer) string {
	type line struct {
		dir    bpf.EniwirePolicyDirection
		prefix netip.Prefix
		set    uint32
	}
	lines := make([]line, len(entries))
	for i, e := range entries {
		a, bits := netip.AddrFrom16(e.key.Peer.Addr), int(e.key.Prefixlen)-64
		if a.Is4In6() && bits >= mappedBits {
			a, bits = a.Unmap(), bits-mappedBits
		}
		lines[i] = line{e.key.Direction, netip.PrefixFrom(a, bits), e.set}
	}
	slices.SortFunc(lines, func(a, b line) int {
		if c := comparePrefix(a.prefix, b.prefix); c != 0 {
			return c
		}
		return int(a.dir) - int(b.dir)
	})
	var content []byte
	for _, l := range lines {
		content = appendPeerLine(content, l.dir, l.prefix, l.set)
	}
	return peerSetDigest(content)
}
