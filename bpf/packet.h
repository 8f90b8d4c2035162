/* SPDX-License-Identifier: GPL-2.0 */
/* Bounds-checked packet parsing for eniwire's tc programs. Each helper checks every byte it reads against
 * data_end, because the verifier insists and because pods send whatever they like. */
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
	PARSE_NOT_IPV4 = 1,
	PARSE_TRUNCATED = 2,
};

/* The fields of an IPv4 packet the programs decide on. */
struct packet {
	__be32 saddr;
	__be32 daddr;
	__u8 protocol;
	__u16 sport; /* network order; 0 when unknown (options, fragments, other protocols) */
	__u16 dport;
	__u32 len;
};

/* The first 8 bytes of an ICMP echo; linux/icmp.h drags in libc headers the BPF target cannot use. */
struct icmp_echo {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id;
	__be16 sequence;
};

#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

static __always_inline void ip_addr_from_v4(struct ip_addr *a, __be32 v4)
{
	__builtin_memset(a, 0, sizeof(*a));
	a->addr[10] = 0xff;
	a->addr[11] = 0xff;
	__builtin_memcpy(&a->addr[12], &v4, sizeof(v4));
}

/* parse_l4_ports reads the ports (or ICMP echo id) right after an option-less, unfragmented IPv4 header.
 * The verifier rejects offsets computed from ihl, so only ihl == 5 is parsed; anything else keeps port 0. */
static __always_inline void parse_l4_ports(struct iphdr *ip, void *data_end, struct packet *p)
{
	if (ip->ihl != 5 || (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
		return;
	void *l4 = (void *)(ip + 1);
	switch (ip->protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP: {
		/* TCP and UDP both start with source and destination ports. */
		struct udphdr *udp = l4;
		if ((void *)(udp + 1) > data_end)
			return;
		p->sport = udp->source;
		p->dport = udp->dest;
		return;
	}
	case IPPROTO_ICMP: {
		struct icmp_echo *icmp = l4;
		if ((void *)(icmp + 1) > data_end)
			return;
		if (icmp->type == ICMP_ECHO || icmp->type == ICMP_ECHOREPLY) {
			/* The echo id plays the port on both sides of the exchange. */
			p->sport = icmp->id;
			p->dport = icmp->id;
		}
		return;
	}
	}
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
		return PARSE_TRUNCATED;

	__builtin_memset(p, 0, sizeof(*p));
	p->saddr = ip->saddr;
	p->daddr = ip->daddr;
	p->protocol = ip->protocol;
	p->len = skb->len;
	parse_l4_ports(ip, data_end, p);
	return PARSE_OK;
}
