package datapath

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/eniwire/eniwire/internal/inetsum"
)

// Frames the programs are tested on: Ethernet + IPv4 (with a valid header checksum, so a test can check
// the programs keep it valid) + a UDP, TCP or ICMP header.

const (
	protoICMP = 1
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

const ethLen = 14

// frame builds an Ethernet + IPv4 + UDP/TCP/ICMP-echo packet with TTL 64.
func frame(src, dst netip.Addr, proto uint8, sport, dport uint16) []byte {
	var l4 []byte
	switch proto {
	case protoUDP:
		l4 = make([]byte, 8+16)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	case protoTCP:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN: a flow's opening, which a packet without an entry must be to open one
	case protoICMP:
		l4 = make([]byte, 8)
		l4[0] = 8 // echo request
		binary.BigEndian.PutUint16(l4[4:], sport)
	default:
		l4 = make([]byte, 12)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
	}
	return ipv4Frame(src, dst, proto, l4)
}

// ipv4Frame wraps an L4 payload in Ethernet and a 20-byte IPv4 header.
func ipv4Frame(src, dst netip.Addr, proto uint8, l4 []byte) []byte {
	pkt := make([]byte, ethLen+20+len(l4))
	copy(pkt[0:6], []byte{0x02, 0, 0, 0, 0, 0x01})
	copy(pkt[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(pkt[12:], 0x0800)
	ip := pkt[ethLen:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
	ip[8] = 64
	ip[9] = proto
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	copy(ip[20:], l4)
	setIPChecksum(pkt)
	return pkt
}

// ipHeaderLen is the IPv4 header length of a frame, options included.
func ipHeaderLen(pkt []byte) int { return int(pkt[ethLen]&0x0f) * 4 }

func setIPChecksum(pkt []byte) { inetsum.SetIPv4Header(pkt[ethLen : ethLen+ipHeaderLen(pkt)]) }

// ipChecksumValid reports whether a frame's IPv4 header checksum verifies.
func ipChecksumValid(pkt []byte) bool {
	return inetsum.IPv4HeaderValid(pkt[ethLen : ethLen+ipHeaderLen(pkt)])
}

// withTTL sets a frame's TTL.
func withTTL(pkt []byte, ttl uint8) []byte {
	pkt[ethLen+8] = ttl
	setIPChecksum(pkt)
	return pkt
}

// withOptions inserts n 4-byte words of IPv4 options (no-ops) after the fixed header.
func withOptions(pkt []byte, n int) []byte {
	opts := make([]byte, 4*n)
	for i := range opts {
		opts[i] = 1 // NOP
	}
	out := append(append(append([]byte(nil), pkt[:ethLen+20]...), opts...), pkt[ethLen+20:]...)
	out[ethLen] = 0x40 | byte(5+n)
	binary.BigEndian.PutUint16(out[ethLen+2:], uint16(len(out)-ethLen))
	setIPChecksum(out)
	return out
}

// asFragment marks a frame as a fragment: more fragments to come, at offset (in 8-byte units).
func asFragment(pkt []byte, more bool, offset uint16) []byte {
	v := offset & 0x1fff
	if more {
		v |= 0x2000
	}
	binary.BigEndian.PutUint16(pkt[ethLen+6:], v)
	setIPChecksum(pkt)
	return pkt
}

// padded grows a frame to size bytes (a larger payload).
func padded(pkt []byte, size int) []byte {
	out := append(append([]byte(nil), pkt...), make([]byte, size-len(pkt))...)
	binary.BigEndian.PutUint16(out[ethLen+2:], uint16(len(out)-ethLen))
	setIPChecksum(out)
	return out
}

// icmpError builds an ICMP error from src to dst quoting the IPv4 header and the first 8 bytes of the
// payload of quoted (a frame), as routers and hosts do.
func icmpError(src, dst netip.Addr, typ, code uint8, quoted []byte) []byte {
	ip := quoted[ethLen:]
	q := ip[:ipHeaderLen(quoted)+8]
	l4 := make([]byte, 8+len(q))
	l4[0], l4[1] = typ, code
	copy(l4[8:], q)
	return ipv4Frame(src, dst, protoICMP, l4)
}

const (
	icmpDestUnreachable = 3
	icmpTimeExceeded    = 11
	codePortUnreachable = 3
	codeFragNeeded      = 4
)

// arpFrame is a minimal ARP request: not IPv4.
func arpFrame() []byte {
	pkt := make([]byte, ethLen+28)
	copy(pkt[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	binary.BigEndian.PutUint16(pkt[12:], 0x0806)
	return pkt
}

// ipv6Frame is an IPv6 packet with the given next header; for ICMPv6 its first byte is icmpType.
func ipv6Frame(next, icmpType uint8) []byte {
	pkt := make([]byte, ethLen+40+24)
	copy(pkt[0:6], []byte{0x33, 0x33, 0xff, 0, 0, 1})
	binary.BigEndian.PutUint16(pkt[12:], 0x86dd)
	ip := pkt[ethLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], 24)
	ip[6] = next
	ip[7] = 255
	ip[8], ip[9] = 0xfe, 0x80
	ip[23] = 1
	ip[24], ip[25] = 0xff, 0x02
	ip[39] = 1
	ip[40] = icmpType
	return pkt
}

const (
	nextICMPv6            = 58
	nextUDP               = 17
	icmpv6RouterSolicit   = 133
	icmpv6RouterAdvert    = 134
	icmpv6NeighborSolicit = 135
	icmpv6NeighborAdvert  = 136
	icmpv6Redirect        = 137
)

// badHeaderFrame is an IPv4 packet whose header length field (ihl 4) is shorter than any IPv4 header.
// (BPF_PROG_TEST_RUN refuses frames shorter than a 20-byte IPv4 header, so this is how a truncated header
// reaches the program under test.)
func badHeaderFrame(src, dst netip.Addr) []byte {
	pkt := frame(src, dst, protoUDP, 1, 2)
	pkt[ethLen] = 0x44
	return pkt
}

// cutFrame is a packet cut short inside its L4 header: two bytes of TCP.
func cutFrame(src, dst netip.Addr) []byte {
	return frame(src, dst, protoTCP, 1, 2)[:ethLen+20+2]
}

const (
	etherTypeVLAN = 0x8100 // 802.1Q
	etherTypeQinQ = 0x88a8 // 802.1ad
)

// vlanTagged inserts VLAN tags (VLAN 0, priority 0) after the MACs, outermost first: what a pod with
// CAP_NET_RAW can put on its frames.
func vlanTagged(pkt []byte, tpids ...uint16) []byte {
	out := append([]byte(nil), pkt[:12]...)
	for _, tpid := range tpids {
		out = binary.BigEndian.AppendUint16(out, tpid)
		out = binary.BigEndian.AppendUint16(out, 0)
	}
	return append(out, pkt[12:]...)
}

// etherTypeFrame is a minimal frame of the given EtherType, to the host.
func etherTypeFrame(etherType uint16) []byte {
	pkt := make([]byte, ethLen+46)
	copy(pkt[0:6], []byte{0x02, 0, 0, 0, 0, 0x01})
	copy(pkt[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(pkt[12:], etherType)
	return pkt
}

// IPv4 options a router acts on (RFC 791): it records its address in Record Route, and follows a source
// route only when told to (Linux: accept_source_route, off by default).
const (
	optRecordRoute = 7
	optLooseSource = 131
	optStrictRoute = 137
)

// withRouteOption inserts an IPv4 option of type typ listing one address (a source route's next hop, or a
// Record Route slot), padded to a 4-byte boundary.
func withRouteOption(pkt []byte, typ uint8, hop netip.Addr) []byte {
	h := hop.As4()
	opt := append([]byte{typ, 7, 4}, h[:]...)
	opt = append(opt, 0) // end of options
	out := append(append(append([]byte(nil), pkt[:ethLen+20]...), opt...), pkt[ethLen+20:]...)
	out[ethLen] = 0x40 | byte(5+len(opt)/4)
	binary.BigEndian.PutUint16(out[ethLen+2:], uint16(len(out)-ethLen))
	setIPChecksum(out)
	return out
}

// withBadChecksum spoils a frame's IPv4 header checksum.
func withBadChecksum(pkt []byte) []byte {
	pkt[ethLen+10] ^= 0x5a
	return pkt
}

// routerAdvertisement is an ICMPv6 Router Advertisement from fe80::1 to all nodes, offering a default
// route for 30 minutes, as sent by a host with MAC src.
func routerAdvertisement(src net.HardwareAddr) []byte {
	from, to := netip.MustParseAddr("fe80::1").As16(), netip.MustParseAddr("ff02::1").As16()
	icmp := make([]byte, 16)
	icmp[0] = icmpv6RouterAdvert
	icmp[4] = 64                                // current hop limit
	binary.BigEndian.PutUint16(icmp[6:], 30*60) // router lifetime: a default router
	// The checksum covers a pseudo-header: source, destination, length, next header.
	pseudo := append(append(append([]byte(nil), from[:]...), to[:]...), 0, 0, 0, byte(len(icmp)), 0, 0, 0, nextICMPv6)
	binary.BigEndian.PutUint16(icmp[2:], ^inetsum.Sum(append(pseudo, icmp...)))

	pkt := make([]byte, ethLen+40, ethLen+40+len(icmp))
	copy(pkt[0:6], []byte{0x33, 0x33, 0, 0, 0, 1})
	copy(pkt[6:12], src)
	binary.BigEndian.PutUint16(pkt[12:], 0x86dd)
	ip := pkt[ethLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	ip[6], ip[7] = nextICMPv6, 255 // neighbour discovery is only taken with hop limit 255
	copy(ip[8:24], from[:])
	copy(ip[24:40], to[:])
	return append(pkt, icmp...)
}
