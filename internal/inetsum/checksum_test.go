package inetsum

import "testing"

// TestSetIPv4HeaderMatchesAKnownHeader: a header whose checksum is known (0xb861, the worked example of many
// references: 45 00 00 73 00 00 40 00 40 11 .. .. c0 a8 00 01 c0 a8 00 c7) gets it, and then verifies.
func TestSetIPv4HeaderMatchesAKnownHeader(t *testing.T) {
	hdr := []byte{0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0xff, 0xff, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0, 0xc7}
	if IPv4HeaderValid(hdr) {
		t.Fatal("a header with a wrong checksum verifies")
	}
	SetIPv4Header(hdr)
	if hdr[10] != 0xb8 || hdr[11] != 0x61 {
		t.Fatalf("checksum = %#02x%02x, want 0xb861", hdr[10], hdr[11])
	}
	if !IPv4HeaderValid(hdr) {
		t.Fatal("the header does not verify after SetIPv4Header")
	}
}
