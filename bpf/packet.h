/* SPDX-License-Identifier: GPL-2.0 */
/* Packet parsing for eniwire's tc programs. The Ethernet and fixed IPv4 headers are read in place, checked
 * against data_end (the verifier insists, and pods send whatever they like); everything at an offset that
 * depends on the header length (options, the L4 header, the header quoted by an ICMP error) is read with
 * bpf_skb_load_bytes, which bounds-checks against the whole packet, linear or not. */
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
	PARSE_NOT_IPV4 = 1,  /* another EtherType: ARP, IPv6, ... */
	PARSE_TRUNCATED = 2, /* shorter than the headers it announces */
	PARSE_MALFORMED = 3, /* an IPv4 EtherType whose header is not IPv4 (version, ihl < 5) */
};

/* The fields of an IPv4 packet the programs decide on. */
struct packet {
	__be32 saddr;
	__be32 daddr;
	__u32 len;
	__u32 l4_off;  /* offset of the L4 header in the frame: after the IPv4 options, if any */
	__u8 protocol;
	__u8 ttl;
	__u8 fragment; /* a fragment: FRAGMENT_FIRST (MF, offset 0) carries the ports, FRAGMENT_LATER does not */
	__u8 pad;
	__sum16 check; /* the header checksum, as sent */
	__u16 pad2;
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

#define FRAGMENT_FIRST 1
#define FRAGMENT_LATER 2

static __always_inline void ip_addr_from_v4(struct ip_addr *a, __be32 v4)
{
	__builtin_memset(a, 0, sizeof(*a));
	a->addr[10] = 0xff;
	a->addr[11] = 0xff;
	__builtin_memcpy(&a->addr[12], &v4, sizeof(v4));
}

static __always_inline enum parse_result parse_ipv4(struct __sk_buff *skb, struct packet *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return PARSE_TRUNCATED;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return PARSE_NOT_IPV4;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return PARSE_TRUNCATED;
	if (ip->version != 4 || ip->ihl < 5)
		return PARSE_MALFORMED;

	__builtin_memset(p, 0, sizeof(*p));
	p->saddr = ip->saddr;
	p->daddr = ip->daddr;
	p->protocol = ip->protocol;
	p->ttl = ip->ttl;
	p->check = ip->check;
	p->len = skb->len;
	p->l4_off = ETH_HLEN_ + ip->ihl * 4;
	if (ip->frag_off & bpf_htons(IP_OFFSET))
		p->fragment = FRAGMENT_LATER;
	else if (ip->frag_off & bpf_htons(IP_MF))
		p->fragment = FRAGMENT_FIRST;
	if (p->l4_off > skb->len)
		return PARSE_TRUNCATED;
	return PARSE_OK;
}

/* decrement_ttl does what a router does to a packet it forwards, checksum included (as the kernel's
 * ip_decrease_ttl), with one bpf_skb_store_bytes of the TTL, protocol and checksum, so the header is never
 * half-written. The programs write packet data through this helper only, never directly: a direct write
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

	h.ttl = p->ttl - 1;
	h.protocol = p->protocol;
	h.check = (__sum16)(check + (check >= 0xFFFF));
	return bpf_skb_store_bytes(skb, ETH_HLEN_ + __builtin_offsetof(struct iphdr, ttl), &h, sizeof(h), 0);
}
