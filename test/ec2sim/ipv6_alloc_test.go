package ec2sim

import (
	"net/netip"
	"testing"
)

// A crowded /64: the allocator finds the last free /80s, skips the one holding an address the same call
// names, and says so when none is left.
func TestPrefixesByCountAvoidAddressesTheSameCallNames(t *testing.T) {
	sv := newSubnetIPv6(1, "subnet-0test", netip.MustParsePrefix(DualStackSubnetAIPv6))
	holder := &eni{ID: "eni-0holder"}
	for idx := 1; idx < 0xffff; idx++ {
		if idx != 5 && idx != 6 {
			sv.prefixes[sv.prefix(uint16(idx))] = holder
		}
	}
	named := sv.prefix(5).Addr().Next()
	got := sv.pickPrefixes(1, []netip.Addr{named})
	if len(got) != 1 || got[0] != sv.prefix(6) {
		t.Fatalf("picked %v, want [%s]: %s holds %s, which the call names", got, sv.prefix(6), sv.prefix(5), named)
	}
	if got := sv.pickPrefixes(2, []netip.Addr{named}); got != nil {
		t.Fatalf("picked %v from a /64 with one usable /80 left", got)
	}
	if sv.prefixFree(sv.prefix(0)) || sv.prefixFree(sv.prefix(0xffff)) {
		t.Error("the /80s holding AWS's reserved addresses are handed out")
	}
}
