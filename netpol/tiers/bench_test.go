package tiers

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// BenchmarkFlatten flattens 100 admin rules at distinct priorities over 1,000 nested peer prefixes (ten
// /16s, ninety /24s inside them, nine hundred /32s inside those; ten to a rule), with a few port ranges
// each, for a pod that NetworkPolicy isolates; it reports the entries and port ranges produced.
func BenchmarkFlatten(b *testing.B) {
	d := benchDirection()
	var res Result
	for b.Loop() {
		res = Flatten(d)
	}
	ranges := 0
	for _, e := range res.Entries {
		ranges += len(e.Except)
	}
	b.ReportMetric(float64(len(res.Entries)), "entries")
	b.ReportMetric(float64(ranges), "ranges")
}

func benchDirection() Direction {
	r := rand.New(rand.NewPCG(1, 2))
	var prefixes []netip.Prefix
	for i := range 10 {
		prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16))
		for j := range 9 {
			prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), byte(j), 0}), 24))
			for k := range 10 {
				prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), byte(j), byte(k + 1)}), 32))
			}
		}
	}
	r.Shuffle(len(prefixes), func(i, j int) { prefixes[i], prefixes[j] = prefixes[j], prefixes[i] })
	d := Direction{Isolated: true}
	for i := range 100 {
		ru := Rule{Policy: "policy", Priority: int32(i * 10), Action: []Action{Accept, Accept, Deny, Deny, Pass}[r.IntN(5)]}
		ru.Peers = prefixes[i*10 : i*10+10]
		if r.IntN(10) != 0 {
			for range 1 + r.IntN(3) {
				first := uint16(1 + r.IntN(2000))
				ru.Ports = append(ru.Ports, dptypes.PortRange{Protocol: []uint8{6, 17}[r.IntN(2)], First: first, Last: first + uint16(r.IntN(100))})
			}
		}
		d.Admin = append(d.Admin, ru)
	}
	for i := range 10 {
		d.NetworkPolicy = append(d.NetworkPolicy, dptypes.PeerPorts{
			Peer:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16),
			Ports: []dptypes.PortRange{{Protocol: 6, First: 443, Last: 443}},
		})
	}
	return d
}
