package netpol

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

func TestFold(t *testing.T) {
	g := func(prefix string, ports portSet, except ...string) grant {
		gr := grant{prefix: netip.MustParsePrefix(prefix), ports: ports}
		for _, e := range except {
			gr.except = append(gr.except, netip.MustParsePrefix(e))
		}
		return gr
	}
	http, dns := portSet{tcp(80, 80)}, portSet{udp(53, 53)}
	tests := []struct {
		name   string
		grants []grant
		want   []dptypes.PeerPorts
	}{
		{"no grants, no entries", nil, nil},
		{"one prefix granted twice is one entry with the union",
			[]grant{g("10.0.0.0/8", http), g("10.0.0.0/8", dns)},
			entries(entry("10.0.0.0/8", tcp(80, 80), udp(53, 53)))},
		{"an except inside an except: the inner hole of one rule is covered by another",
			[]grant{g("10.0.0.0/8", http, "10.1.0.0/16"), g("10.1.0.0/16", dns, "10.1.1.0/24")},
			entries(entry("10.0.0.0/8", tcp(80, 80)), entry("10.1.0.0/16", udp(53, 53)), entry("10.1.1.0/24"))},
		{"an except as wide as its block grants nothing",
			[]grant{g("10.0.0.0/8", http, "10.0.0.0/8")}, nil},
		{"an except under a wider grant of another rule falls back to that rule's ports",
			[]grant{g("0.0.0.0/0", dns), g("10.0.0.0/8", http, "10.2.0.0/16")},
			entries(entry("0.0.0.0/0", udp(53, 53)), entry("10.0.0.0/8", tcp(80, 80), udp(53, 53)), entry("10.2.0.0/16", udp(53, 53)))},
		{"host prefixes inside a grant with the same ports are left out, those adding ports stay",
			[]grant{g("10.0.0.0/8", http), g("10.0.0.1/32", http), g("10.0.0.2/32", dns)},
			entries(entry("10.0.0.0/8", tcp(80, 80)), entry("10.0.0.2/32", tcp(80, 80), udp(53, 53)))},
		{"IPv4 sorts before IPv6 and the families never cover each other",
			[]grant{g("fd00::1/128", http), g("::/0", dns), g("10.0.0.1/32", http)},
			entries(entry("10.0.0.1/32", tcp(80, 80)), entry("::/0", udp(53, 53)), entry("fd00::1/128", tcp(80, 80), udp(53, 53)))},
		{"IPv6 prefixes near :: nest and sort by address, after every IPv4 prefix",
			[]grant{g("0:0:0:1::/64", http), g("::1/128", http), g("::/0", dns), g("255.0.0.0/8", http)},
			entries(entry("255.0.0.0/8", tcp(80, 80)), entry("::/0", udp(53, 53)), entry("::1/128", tcp(80, 80), udp(53, 53)), entry("0:0:0:1::/64", tcp(80, 80), udp(53, 53)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fold(tt.grants, &scratch{})
			eq := func(a, b dptypes.PeerPorts) bool { return a.Peer == b.Peer && slices.Equal(a.Ports, b.Ports) }
			if !slices.EqualFunc(got, tt.want, eq) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}
