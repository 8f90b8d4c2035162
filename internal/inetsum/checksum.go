// Package inetsum computes the Internet checksum (RFC 1071) of the frames that tests and benchmarks hand to
// the BPF programs, which hand an IPv4 header whose checksum does not verify to the host.
package inetsum

import "encoding/binary"

// SetIPv4Header writes the checksum of the IPv4 header hdr (options included) into its checksum field.
func SetIPv4Header(hdr []byte) {
	hdr[10], hdr[11] = 0, 0
	binary.BigEndian.PutUint16(hdr[10:], ^Sum(hdr))
}

// IPv4HeaderValid reports whether the IPv4 header hdr's checksum verifies.
func IPv4HeaderValid(hdr []byte) bool { return Sum(hdr) == 0xffff }

// Sum is the 16-bit ones' complement sum of b (its complement is the checksum).
func Sum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
