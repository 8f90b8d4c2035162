package datapath

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 frames the programs are tested on: Ethernet + a 40-byte IPv6 header (hop limit 64) + a UDP, TCP or
// ICMPv6 header, optionally behind a hop-by-hop options or fragment header.

const (
	protoICMPv6      = 58
	nextHopByHop     = 0
	nextFragment     = 44
	icmpv6EchoReq    = 128
	icmpv6PacketBig  = 2
	icmpv6TimeExceed = 3
	icmpv6DestUnreac = 1
)

// frame6 builds an Ethernet + IPv6 + UDP/TCP/ICMPv6-echo packet with hop limit 64.
func frame6(src, dst netip.Addr, proto uint8, sport, dport uint16) []byte {
	var l4 []byte
	switch proto {
	case protoICMPv6:
		l4 = make([]byte, 8)
		l4[0] = icmpv6EchoReq
		binary.BigEndian.PutUint16(l4[4:], sport)
	case protoTCP:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN: a flow's opening, which a packet without an entry must be to open one
	default:
		l4 = make([]byte, 8+16)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	}
	return ipv6FrameOf(src, dst, proto, l4)
}

// ipv6FrameOf wraps a payload in Ethernet and an IPv6 header whose next header is next.
func ipv6FrameOf(src, dst netip.Addr, next uint8, payload []byte) []byte {
	pkt := make([]byte, ethLen+40+len(payload))
	copy(pkt[0:6], []byte{0x02, 0, 0, 0, 0, 0x01})
	copy(pkt[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(pkt[12:], 0x86dd)
	ip := pkt[ethLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
	ip[6] = next
	ip[7] = 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	copy(ip[40:], payload)
	return pkt
}

// withHopLimit sets an IPv6 frame's hop limit.
func withHopLimit(pkt []byte, hops uint8) []byte {
	pkt[ethLen+7] = hops
	return pkt
}

// withVersion sets the version field of an IPv6 frame's header. (BPF_PROG_TEST_RUN refuses a frame shorter
// than the header its EtherType announces, so this is how a bad header reaches the program under test.)
func withVersion(pkt []byte, v uint8) []byte {
	pkt[ethLen] = v<<4 | pkt[ethLen]&0x0f
	return pkt
}

// withExtension inserts an 8-byte extension header of type next after the fixed IPv6 header: a hop-by-hop
// header of padding, or a fragment header (more fragments to come, at offset in 8-byte units).
func withExtension(pkt []byte, next uint8, more bool, offset uint16) []byte {
	ext := make([]byte, 8)
	ext[0] = pkt[ethLen+6] // the header that follows it
	switch next {
	case nextHopByHop:
		ext[2] = 1 // PadN, 4 bytes of padding
		ext[3] = 4
	case nextFragment:
		v := offset << 3
		if more {
			v |= 1
		}
		binary.BigEndian.PutUint16(ext[2:], v)
		binary.BigEndian.PutUint32(ext[4:], 0x1234)
	}
	out := append(append(append([]byte(nil), pkt[:ethLen+40]...), ext...), pkt[ethLen+40:]...)
	out[ethLen+6] = next
	binary.BigEndian.PutUint16(out[ethLen+4:], uint16(len(out)-ethLen-40))
	return out
}

// padded6 grows an IPv6 frame to size bytes.
func padded6(pkt []byte, size int) []byte {
	out := append(append([]byte(nil), pkt...), make([]byte, size-len(pkt))...)
	binary.BigEndian.PutUint16(out[ethLen+4:], uint16(len(out)-ethLen-40))
	return out
}

// icmp6Error builds an ICMPv6 error from src to dst quoting the start of quoted (a frame): its IPv6
// header and the first 8 bytes of its payload.
func icmp6Error(src, dst netip.Addr, typ, code uint8, quoted []byte) []byte {
	q := quoted[ethLen : ethLen+40+8]
	l4 := make([]byte, 8+len(q))
	l4[0], l4[1] = typ, code
	copy(l4[8:], q)
	return ipv6FrameOf(src, dst, protoICMPv6, l4)
}

// icmp6 builds a bare ICMPv6 message of type typ (neighbour discovery, say) with hop limit 255.
func icmp6(src, dst netip.Addr, typ uint8) []byte {
	l4 := make([]byte, 24)
	l4[0] = typ
	return withHopLimit(ipv6FrameOf(src, dst, protoICMPv6, l4), 255)
}
