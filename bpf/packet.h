/* SPDX-License-Identifier: GPL-2.0 */
/* Packet parsing for eniwire's tc programs. The Ethernet and fixed IPv4 or IPv6 headers are read in place,
 * checked against data_end (the verifier insists, and pods send whatever they like); everything at an offset
 * that depends on the header length (options, extension headers, the L4 header, the header quoted by an
 * ICMP error) is read with bpf_skb_load_bytes, which bounds-checks against the whole packet, linear or not.
 *
 * IPv4 and IPv6 packets are parsed into one struct packet, whose addresses are 16 bytes (IPv4-mapped for
 * IPv4) as the maps' keys are: every program after parsing is family-agnostic except where a field differs
 * (the TTL's checksum, the conntrack tuple's size, the ICMP types). */
#pragma once

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "maps.h"

enum parse_result {
	PARSE_OK = 0,
	PARSE_NOT_IP = 1,    /* another EtherType: ARP, ... */
	PARSE_TRUNCATED = 2, /* shorter than the headers it announces */
	PARSE_MALFORMED = 3, /* an IPv4 or IPv6 EtherType whose header is not that version's (version, ihl < 5) */
};

#define FAMILY_IPV4 4
#define FAMILY_IPV6 6

/* The fields of an IPv4 or IPv6 packet the programs decide on. */
struct packet {
	struct ip_addr src; /* IPv4-mapped for IPv4 */
	struct ip_addr dst;
	__u32 len;
	__u32 l4_off;  /* offset of the L4 header in the frame: after the IPv4 options or IPv6 fragment header */
	__u8 protocol; /* IPv6: the next header after a fragment header, if any */
	__u8 ttl;      /* IPv6: the hop limit */
	__u8 fragment; /* a fragment: FRAGMENT_FIRST (MF, offset 0) carries the ports, FRAGMENT_LATER does not */
	__u8 family;   /* FAMILY_IPV4 or FAMILY_IPV6 */
	__sum16 check; /* IPv4: the header checksum, as sent */
	__u8 nd;       /* IPv6: the ICMPv6 type of a neighbour discovery message (133-137), else 0 */
	__u8 hop_by_hop; /* IPv6: a hop-by-hop options header follows the fixed header */
};

/* The first 8 bytes of an ICMP message; linux/icmp.h drags in libc headers the BPF target cannot use. */
struct icmp_head {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id; /* echo id; unused by errors */
	__be16 sequence;
};

#define ICMP_ECHOREPLY 0
#define ICMP_DEST_UNREACH 3
#define ICMP_SOURCE_QUENCH 4
#define ICMP_REDIRECT 5
#define ICMP_ECHO 8
#define ICMP_TIME_EXCEEDED 11
#define ICMP_PARAMETERPROB 12
#define ICMP_TIMESTAMPREPLY 14

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

#define ETH_HLEN_ sizeof(struct ethhdr)

#define IPV6_HLEN 40
#define NEXTHDR_HOP 0
#define NEXTHDR_FRAGMENT 44
#define IPPROTO_ICMPV6_ 58
#define IPV6_FRAG_OFFSET 0xfff8
#define IPV6_FRAG_MORE 0x0001

/* ICMPv6 types (RFC 4443, RFC 4861). */
#define ICMPV6_DEST_UNREACH 1
#define ICMPV6_PKT_TOOBIG 2
#define ICMPV6_TIME_EXCEED 3
#define ICMPV6_PARAMPROB 4
#define ICMPV6_ECHO_REPLY 129
#define NDISC_ROUTER_SOLICITATION 133
#define NDISC_NEIGHBOUR_SOLICITATION 135
#define NDISC_NEIGHBOUR_ADVERTISEMENT 136
#define NDISC_REDIRECT 137

/* The fixed IPv6 header; linux/ipv6.h drags in libc headers the BPF target cannot use. */
struct ipv6_head {
	__u8 version_class; /* version in the high 4 bits */
	__u8 class_flow[3];
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
};

/* An IPv6 fragment header (RFC 8200 4.5). */
struct ipv6_frag_head {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; /* offset in 8-byte units in the high 13 bits, M in bit 0 */
	__be32 id;
};

#define FRAGMENT_FIRST 1
#define FRAGMENT_LATER 2

/* ip_addr_from_v4 writes an IPv4 address IPv4-mapped, in four word stores (every ip_addr the programs
 * write sits at a 4-byte boundary of its struct). */
static __always_inline void ip_addr_from_v4(struct ip_addr *a, __be32 v4)
{
	__u32 *w = (__u32 *)a->addr;
	w[0] = 0;
	w[1] = 0;
	w[2] = bpf_htonl(0xffff);
	w[3] = v4;
}

/* ip_addr_is_v4 says whether an address is IPv4-mapped. */
static __always_inline int ip_addr_is_v4(const struct ip_addr *a)
{
	const __u32 *w = (const __u32 *)a->addr;
	return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0xffff);
}

static __always_inline int ip_addr_eq(const struct ip_addr *a, const struct ip_addr *b)
{
	const __u64 *x = (const __u64 *)a->addr, *y = (const __u64 *)b->addr;
	return x[0] == y[0] && x[1] == y[1];
}

/* ip_addr_is_link_scope says whether an IPv6 source address is one of the link's own: link-local
 * (fe80::/10) or unspecified (::, what a host sends from while it checks its address is unique). */
static __always_inline int ip_addr_is_link_scope(const struct ip_addr *a)
{
	const __u64 *w = (const __u64 *)a->addr;
	return (a->addr[0] == 0xfe && (a->addr[1] & 0xc0) == 0x80) || (w[0] == 0 && w[1] == 0);
}

static __always_inline enum parse_result parse_ipv4(struct __sk_buff *skb, struct packet *p, struct ethhdr *eth,
						    void *data_end)
{
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return PARSE_TRUNCATED;
	if (ip->version != 4 || ip->ihl < 5)
		return PARSE_MALFORMED;

	/* Field by field, no memset: this is every IPv4 packet's cost. */
	p->family = FAMILY_IPV4;
	ip_addr_from_v4(&p->src, ip->saddr);
	ip_addr_from_v4(&p->dst, ip->daddr);
	p->protocol = ip->protocol;
	p->ttl = ip->ttl;
	p->check = ip->check;
	p->len = skb->len;
	p->l4_off = ETH_HLEN_ + ip->ihl * 4;
	p->nd = 0;
	p->hop_by_hop = 0;
	p->fragment = 0;
	if (ip->frag_off & bpf_htons(IP_OFFSET))
		p->fragment = FRAGMENT_LATER;
	else if (ip->frag_off & bpf_htons(IP_MF))
		p->fragment = FRAGMENT_FIRST;
	if (p->l4_off > skb->len)
		return PARSE_TRUNCATED;
	return PARSE_OK;
}

/* parse_ipv6 reads the fixed header and, when one follows it, a fragment header (the one extension header
 * the fast paths look through: it hides the protocol and the ports). Any other extension header is the
 * packet's protocol as far as the programs go: none of the fast paths looks it up in conntrack, so such a
 * packet goes to the host (flow.h), which walks the chain; a hop-by-hop header, which every router on the
 * way must read, is flagged for the host too. */
static __always_inline enum parse_result parse_ipv6(struct __sk_buff *skb, struct packet *p, struct ethhdr *eth,
						    void *data_end)
{
	struct ipv6_head *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > data_end)
		return PARSE_TRUNCATED;
	if ((ip6->version_class >> 4) != 6)
		return PARSE_MALFORMED;

	__builtin_memset(p, 0, sizeof(*p));
	p->family = FAMILY_IPV6;
	__builtin_memcpy(p->src.addr, ip6->saddr, 16);
	__builtin_memcpy(p->dst.addr, ip6->daddr, 16);
	p->protocol = ip6->nexthdr;
	p->ttl = ip6->hop_limit;
	p->len = skb->len;
	p->l4_off = ETH_HLEN_ + IPV6_HLEN;
	p->hop_by_hop = ip6->nexthdr == NEXTHDR_HOP;
	if (p->protocol == NEXTHDR_FRAGMENT) {
		struct ipv6_frag_head fh;
		if (bpf_skb_load_bytes(skb, p->l4_off, &fh, sizeof(fh)) < 0)
			return PARSE_TRUNCATED;
		p->protocol = fh.nexthdr;
		p->l4_off += sizeof(fh);
		if (fh.frag_off & bpf_htons(IPV6_FRAG_OFFSET))
			p->fragment = FRAGMENT_LATER;
		else if (fh.frag_off & bpf_htons(IPV6_FRAG_MORE))
			p->fragment = FRAGMENT_FIRST;
	}
	if (p->l4_off > skb->len)
		return PARSE_TRUNCATED;
	if (p->protocol == IPPROTO_ICMPV6_ && !p->fragment) {
		__u8 type = 0;
		if (bpf_skb_load_bytes(skb, p->l4_off, &type, 1) == 0 && type >= NDISC_ROUTER_SOLICITATION &&
		    type <= NDISC_REDIRECT)
			p->nd = type;
	}
	return PARSE_OK;
}

/* parse_ip parses an IPv4 or IPv6 packet. */
static __always_inline enum parse_result parse_ip(struct __sk_buff *skb, struct packet *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return PARSE_TRUNCATED;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return parse_ipv4(skb, p, eth, data_end);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return parse_ipv6(skb, p, eth, data_end);
	return PARSE_NOT_IP;
}

/* decrement_ttl does what a router does to a packet it forwards: IPv6's hop limit is one byte without a
 * checksum; IPv4's TTL is written with its checksum (as the kernel's ip_decrease_ttl), with one
 * bpf_skb_store_bytes of the TTL, protocol and checksum, so the header is never half-written. The programs write packet data through this helper only, never directly: a direct write
 * makes the verifier put an unclone step in front of the whole program, which every cloned packet would
 * pay, those passed to the host included. Here only a forwarded packet that is cloned gets its private
 * copy, and the write fails (< 0) when that copy cannot be allocated. The caller has made sure the TTL is
 * above 1. */
static __always_inline long decrement_ttl(struct __sk_buff *skb, struct packet *p)
{
	struct {
		__u8 ttl;
		__u8 protocol;
		__sum16 check;
	} h;
	__u32 check = (__u32)p->check + (__u32)bpf_htons(0x0100);

	if (p->family == FAMILY_IPV6) {
		__u8 hop_limit = p->ttl - 1;
		return bpf_skb_store_bytes(skb, ETH_HLEN_ + __builtin_offsetof(struct ipv6_head, hop_limit), &hop_limit,
					   1, 0);
	}
	h.ttl = p->ttl - 1;
	h.protocol = p->protocol;
	h.check = (__sum16)(check + (check >= 0xFFFF));
	return bpf_skb_store_bytes(skb, ETH_HLEN_ + __builtin_offsetof(struct iphdr, ttl), &h, sizeof(h), 0);
}
