package tiers

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestFlattenWritesAnEntryOnlyWhereVerdictsChange checks Flatten's entries whole: the two roots, then a
// prefix only where its verdicts differ from the entry enclosing it.
func TestFlattenWritesAnEntryOnlyWhereVerdictsChange(t *testing.T) {
	d := Direction{
		Admin: []Rule{
			rule("no-ssh", 1, 0, Deny, "10.1.2.3/32", port(tcp, 22)),
			rule("net", 2, 0, Accept, "10.1.0.0/16"),
			// The same verdicts as 10.1.0.0/16 around it: no entry of its own.
			rule("again", 3, 0, Accept, "10.1.7.0/24"),
			rule("dns", 4, 0, Accept, "fd00::/64", ports(udp, 53, 53), ports(tcp, 53, 53)),
		},
		Isolated: true,
	}
	want := []Entry{
		{Peer: netip.MustParsePrefix("0.0.0.0/0"), Allow: false},
		{Peer: netip.MustParsePrefix("10.1.0.0/16"), Allow: true},
		{Peer: netip.MustParsePrefix("10.1.2.3/32"), Allow: true, Except: []dptypes.PortRange{port(tcp, 22)}},
		{Peer: netip.MustParsePrefix("::/0"), Allow: false},
		{Peer: netip.MustParsePrefix("fd00::/64"), Allow: false, Except: []dptypes.PortRange{port(tcp, 53), port(udp, 53)}},
	}
	got := Flatten(d)
	if !reflect.DeepEqual(got.Entries, want) {
		t.Fatalf("Flatten =\n%v\nwant\n%v", got.Entries, want)
	}
	if !got.Needed() {
		t.Errorf("Needed() = false for a direction that denies flows")
	}
}

// TestFlattenMergesNeighbouringPortsOfEqualVerdict checks that cells of one verdict become one range, and
// that a protocol's ranges end at the last port.
func TestFlattenMergesNeighbouringPortsOfEqualVerdict(t *testing.T) {
	d := Direction{Admin: []Rule{
		rule("a", 1, 0, Deny, "10.0.0.0/8", ports(tcp, 10, 19), ports(tcp, 20, 29)),
		rule("b", 2, 0, Deny, "10.0.0.0/8", ports(tcp, 30, 39), ports(udp, 65000, 65535)),
		rule("c", 3, 0, Accept, "10.0.0.0/8", ports(tcp, 25, 45)),
	}}
	want := []dptypes.PortRange{ports(tcp, 10, 39), ports(udp, 65000, 65535)}
	got := Flatten(d)
	if len(got.Entries) != 3 || !reflect.DeepEqual(got.Entries[1].Except, want) || !got.Entries[1].Allow {
		t.Fatalf("Flatten = %v, want 10.0.0.0/8 allowed except %v", got.Entries, want)
	}
}

// TestNeededSaysWhetherAnyFlowIsDenied checks that the datapath is spared the directions that deny
// nothing.
func TestNeededSaysWhetherAnyFlowIsDenied(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Direction
		want bool
	}{
		{"nothing selects the pod", Direction{}, false},
		{"NetworkPolicy entries without isolation", Direction{NetworkPolicy: []dptypes.PeerPorts{entry("10.0.0.0/8")}}, false},
		{"only Accept and Pass rules", Direction{
			Admin:    []Rule{rule("a", 0, 0, Accept, "10.0.0.0/8")},
			Baseline: []Rule{rule("p", 0, 0, Pass, "0.0.0.0/0")},
		}, false},
		{"isolated without entries", Direction{Isolated: true}, true},
		{"isolated, every address allowed", Direction{Isolated: true, NetworkPolicy: []dptypes.PeerPorts{entry("0.0.0.0/0", ports(0, 0, 65535)), entry("::/0", ports(0, 0, 65535))}}, false},
		{"a Deny of one port", Direction{Baseline: []Rule{rule("d", 0, 0, Deny, "10.0.0.1/32", port(udp, 53))}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Flatten(tc.d)
			if r.Needed() != tc.want {
				t.Fatalf("Needed() = %v, want %v (entries %v)", r.Needed(), tc.want, r.Entries)
			}
			if !r.Needed() && len(r.Entries) != 0 {
				t.Fatalf("not needed, yet entries %v", r.Entries)
			}
		})
	}
}

// TestFlattenAgreesWithJudgeOnRandomDirections builds random directions in a small address and port
// space, where prefixes nest and rules overlap often, and checks that Flatten's entries, read as the
// datapath reads them, give Judge's verdict on many flows, and that they keep the form the datapath
// relies on.
func TestFlattenAgreesWithJudgeOnRandomDirections(t *testing.T) {
	const seeds, directions, flows = 8, 400, 150
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			for i := range directions {
				d := randomDirection(r)
				res := Flatten(d)
				if err := checkForm(res); err != nil {
					t.Fatalf("direction %d: %v\n%s\nentries %v", i, err, describe(d), res.Entries)
				}
				probes := probeAddrs(d)
				for range flows {
					peer, protocol, port := randomFlow(r, probes)
					want := Judge(d, peer, protocol, port)
					if got := res.Allows(peer, protocol, port); got != want.Allowed {
						t.Fatalf("direction %d, %s proto %d port %d: entries allow %v, Judge %+v\n%s\nentries %v",
							i, peer, protocol, port, got, want, describe(d), res.Entries)
					}
				}
			}
		})
	}
}

// TestFlattenAgreesWithJudgeAtScale checks the benchmark's direction, 100 rules over 1,000 nested
// prefixes, at the edges of every prefix.
func TestFlattenAgreesWithJudgeAtScale(t *testing.T) {
	d := benchDirection()
	res := Flatten(d)
	if err := checkForm(res); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, peer := range probeAddrs(d) {
		for range 4 {
			protocol, port := []uint8{tcp, udp, icmp}[r.IntN(3)], uint16(r.IntN(2200))
			if want := Judge(d, peer, protocol, port); res.Allows(peer, protocol, port) != want.Allowed {
				t.Fatalf("%s proto %d port %d: entries allow %v, Judge %+v", peer, protocol, port, !want.Allowed, want)
			}
		}
	}
}

// checkForm checks what the datapath relies on: unique sorted masked prefixes, both roots when there are
// any, ports of TCP, UDP and SCTP only, sorted, non-empty, disjoint and not adjacent, no entry that
// repeats the one enclosing it, and some flow denied.
func checkForm(res Result) error {
	if !res.Needed() {
		return nil
	}
	roots, denies := 0, false
	for i, e := range res.Entries {
		if e.Peer != e.Peer.Masked() {
			return fmt.Errorf("entry %v is not masked", e.Peer)
		}
		if i > 0 && res.Entries[i-1].Peer.Compare(e.Peer) >= 0 {
			return fmt.Errorf("entry %v follows %v", e.Peer, res.Entries[i-1].Peer)
		}
		if e.Peer.Bits() == 0 {
			roots++
		}
		for j, pr := range e.Except {
			if !hasPorts(pr.Protocol) || pr.First > pr.Last {
				return fmt.Errorf("entry %v: range %v", e.Peer, pr)
			}
			if j > 0 {
				prev := e.Except[j-1]
				if prev.Protocol > pr.Protocol || prev.Protocol == pr.Protocol && uint32(prev.Last)+1 >= uint32(pr.First) {
					return fmt.Errorf("entry %v: range %v after %v", e.Peer, pr, prev)
				}
			}
		}
		if parent, ok := enclosing(res.Entries, e.Peer); ok && sameVerdicts(parent, e) {
			return fmt.Errorf("entry %v repeats %v", e.Peer, parent.Peer)
		}
		denies = denies || !e.Allow || len(e.Except) > 0
	}
	if roots != 2 {
		return fmt.Errorf("%d roots", roots)
	}
	if !denies {
		return fmt.Errorf("entries that deny nothing")
	}
	return nil
}

// enclosing is the entry of the longest prefix that holds p and is not p.
func enclosing(entries []Entry, p netip.Prefix) (Entry, bool) {
	best, found := Entry{}, false
	for _, e := range entries {
		if e.Peer.Bits() < p.Bits() && e.Peer.Contains(p.Addr()) && (!found || e.Peer.Bits() > best.Peer.Bits()) {
			best, found = e, true
		}
	}
	return best, found
}

// The random space: prefixes inside 10.0.0.0/24 and fd00::/120 (and some enclosing them), ports around
// 0..12 and the top of the range, policies a, b and c at priorities 0..2 so that ties are common.
var (
	space4 = netip.MustParsePrefix("10.0.0.0/24")
	space6 = netip.MustParsePrefix("fd00::/120")
	wide   = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("::/0"), netip.MustParsePrefix("fd00::/64")}
)

func randomDirection(r *rand.Rand) Direction {
	d := Direction{Isolated: r.IntN(2) == 0}
	d.Admin = randomRules(r, r.IntN(8))
	d.Baseline = randomRules(r, r.IntN(6))
	if d.Isolated || r.IntN(4) == 0 { // unisolated, the entries must not count
		seen := map[netip.Prefix]bool{}
		for range r.IntN(7) {
			p := randomPrefix(r).Masked()
			if seen[p] {
				continue
			}
			seen[p] = true
			e := dptypes.PeerPorts{Peer: p}
			if r.IntN(4) != 0 { // else a hole: no ports
				e.Ports = randomPorts(r)
			}
			d.NetworkPolicy = append(d.NetworkPolicy, e)
		}
	}
	return d
}

func randomRules(r *rand.Rand, n int) []Rule {
	var rules []Rule
	for range n {
		ru := Rule{
			Policy:   string(rune('a' + r.IntN(3))),
			Priority: int32(r.IntN(3)),
			Index:    r.IntN(4),
			Action:   []Action{Accept, Deny, Pass}[r.IntN(3)],
		}
		if r.IntN(25) == 0 {
			ru.Action = Action(0) // fails closed
		}
		for range 1 + r.IntN(2) {
			ru.Peers = append(ru.Peers, randomPrefix(r))
		}
		if r.IntN(3) != 0 { // else no ports: everything
			ru.Ports = randomPorts(r)
		}
		rules = append(rules, ru)
	}
	return rules
}

// randomPrefix is a prefix of the random space; not always masked.
func randomPrefix(r *rand.Rand) netip.Prefix {
	if r.IntN(8) == 0 {
		return wide[r.IntN(len(wide))]
	}
	space := space4
	if r.IntN(2) == 0 {
		space = space6
	}
	b := space.Addr().AsSlice()
	b[len(b)-1] = byte(r.IntN(256))
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, space.Bits()+r.IntN(a.BitLen()-space.Bits()+1))
}

func randomPorts(r *rand.Rand) []dptypes.PortRange {
	var rs []dptypes.PortRange
	for range 1 + r.IntN(3) {
		pr := dptypes.PortRange{Protocol: []uint8{tcp, udp, 132}[r.IntN(3)]}
		switch r.IntN(12) {
		case 0:
			pr.Protocol = dptypes.AnyProtocol
		case 1:
			pr.Protocol = icmp // matches nothing
		}
		switch r.IntN(6) {
		case 0:
			pr.First, pr.Last = dptypes.AllPorts[0], dptypes.AllPorts[1]
		case 1:
			pr.First = 65530 + uint16(r.IntN(6))
			pr.Last = pr.First + uint16(r.IntN(int(65536-uint32(pr.First))))
		case 2:
			pr.First, pr.Last = 8, 3 // empty
		default:
			pr.First = uint16(r.IntN(10))
			pr.Last = pr.First + uint16(r.IntN(4))
		}
		rs = append(rs, pr)
	}
	return rs
}

// probeAddrs are the addresses where the verdicts of d may change: the first and last of each prefix,
// and their neighbours.
func probeAddrs(d Direction) []netip.Addr {
	var out []netip.Addr
	add := func(p netip.Prefix) {
		first, last := p.Masked().Addr(), lastAddr(p)
		out = append(out, first, last, first.Prev(), last.Next())
	}
	for _, rs := range [][]Rule{d.Admin, d.Baseline} {
		for _, ru := range rs {
			for _, p := range ru.Peers {
				add(p)
			}
		}
	}
	for _, e := range d.NetworkPolicy {
		add(e.Peer)
	}
	return out
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func randomFlow(r *rand.Rand, probes []netip.Addr) (netip.Addr, uint8, uint16) {
	var peer netip.Addr
	switch n := r.IntN(10); {
	case n < 5 && len(probes) > 0:
		peer = probes[r.IntN(len(probes))]
	case n < 9:
		space := space4
		if r.IntN(2) == 0 {
			space = space6
		}
		b := space.Addr().AsSlice()
		b[len(b)-1] = byte(r.IntN(256))
		peer, _ = netip.AddrFromSlice(b)
	default:
		peer = []netip.Addr{netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("::ffff:10.0.0.1")}[r.IntN(3)]
	}
	if !peer.IsValid() { // the neighbour of the first or last address of a family
		peer = netip.MustParseAddr("10.0.0.1")
	}
	protocol := []uint8{tcp, udp, 132, icmp, 58, dptypes.AnyProtocol}[r.IntN(6)]
	var port uint16
	switch n := r.IntN(10); {
	case n < 6:
		port = uint16(r.IntN(14))
	case n < 8:
		port = 65529 + uint16(r.IntN(7))
	default:
		port = uint16(r.IntN(65536))
	}
	return peer, protocol, port
}

// describe is d written out for a failure message.
func describe(d Direction) string {
	s := ""
	for _, ru := range d.Admin {
		s += fmt.Sprintf("admin %s/%d #%d %v %v %v\n", ru.Policy, ru.Priority, ru.Index, ru.Action, ru.Peers, ru.Ports)
	}
	s += fmt.Sprintf("isolated %v: %v\n", d.Isolated, d.NetworkPolicy)
	for _, ru := range d.Baseline {
		s += fmt.Sprintf("baseline %s/%d #%d %v %v %v\n", ru.Policy, ru.Priority, ru.Index, ru.Action, ru.Peers, ru.Ports)
	}
	return s
}
