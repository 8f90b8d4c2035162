package journal

import (
	"slices"
	"testing"
)

func TestSlotsAreSingleAddressesOrWholePrefixes(t *testing.T) {
	for _, tc := range []struct {
		slot  string
		addrs int
		first string
		last  string
	}{
		{"10.0.1.5", 1, "10.0.1.5", "10.0.1.5"},
		{"10.0.1.16/28", 16, "10.0.1.16", "10.0.1.31"},
	} {
		t.Run(tc.slot, func(t *testing.T) {
			a := Addresses(tc.slot)
			if len(a) != tc.addrs || AddrCount(tc.slot) != tc.addrs || a[0] != tc.first || a[len(a)-1] != tc.last {
				t.Fatalf("Addresses(%s) = %v (count %d), want %d from %s to %s", tc.slot, a, AddrCount(tc.slot), tc.addrs, tc.first, tc.last)
			}
			for _, ip := range a {
				if !Covers(tc.slot, ip) {
					t.Errorf("%s does not cover its address %s", tc.slot, ip)
				}
			}
			if Covers(tc.slot, "10.0.1.32") {
				t.Errorf("%s covers 10.0.1.32", tc.slot)
			}
		})
	}
	ips, prefixes := SplitSlots([]string{"10.0.1.5", "10.0.1.16/28", "10.0.1.6"})
	if !slices.Equal(ips, []string{"10.0.1.5", "10.0.1.6"}) || !slices.Equal(prefixes, []string{"10.0.1.16/28"}) {
		t.Errorf("SplitSlots = %v, %v", ips, prefixes)
	}
	e := ENI{IPs: []string{"10.0.1.5", "10.0.1.16/28"}}
	if n := len(e.Addrs()); n != 17 {
		t.Errorf("an ENI with an IP and a prefix gives %d addresses, want 17", n)
	}
}
