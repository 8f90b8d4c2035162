/* SPDX-License-Identifier: GPL-2.0 */
/* One flow, one path. A flow (5-tuple, both directions) is either wholly on the fast path or wholly
 * through the host stack, and the host carries exactly the flows the kernel's conntrack has an entry for,
 * except those eniwire's own entries name (ENIWIRE_CT_TAG): a flow gets one when the host translates or
 * delivers a packet of it, and never while its packets take the fast path, since conntrack sits in the
 * host stack's netfilter hooks, which redirected packets skip. So before a packet takes a fast path, the
 * programs ask conntrack (bpf_skb_ct_lookup) about its flow: known, and not by eniwire's mark, the packet
 * goes to the host like the rest of its flow. See datapath/doc.go for why this and not a
 * flow table of our own.
 *
 * flow_of is the one place that says which flow a packet belongs to; from_pod and to_pod both use it. */
#pragma once

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"

/* The kernel's struct nf_conn, used only as the handle bpf_ct_release takes back. Defined (not just
 * declared) so that its BTF is a struct, as the kernel's is: the loader checks kfunc signatures by kind. */
struct nf_conn {
	int opaque;
};

/* The kernel's struct bpf_ct_opts as of Linux 5.18 (12 bytes, the size every kernel since accepts). */
struct ct_opts {
	__s32 netns_id;
	__s32 error; /* out: why the lookup failed, -ENOENT when there is no entry */
	__u8 l4proto;
	__u8 dir; /* out: the direction of the tuple in the entry */
	__u8 reserved[2];
};

/* The conntrack kfuncs (net/netfilter/nf_conntrack_bpf.c, Linux 5.18 and later, tc and XDP). */
extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *skb, struct bpf_sock_tuple *tuple, __u32 tuple__sz,
					 struct ct_opts *opts, __u32 opts__sz) __ksym;
extern void bpf_ct_release(struct nf_conn *ct) __ksym;

/* The kernel's struct nf_conn___init: an entry allocated and not yet inserted. */
struct nf_conn___init {
	int opaque;
};

/* The kfuncs that create an entry (Linux 6.0 and later; policy.h): allocate, mark and time it, insert. */
extern struct nf_conn___init *bpf_skb_ct_alloc(struct __sk_buff *skb, struct bpf_sock_tuple *tuple, __u32 tuple__sz,
					       struct ct_opts *opts, __u32 opts__sz) __ksym;
extern struct nf_conn *bpf_ct_insert_entry(struct nf_conn___init *ct) __ksym;
extern void bpf_ct_set_timeout(struct nf_conn___init *ct, __u32 timeout) __ksym;
extern int bpf_ct_change_timeout(struct nf_conn *ct, __u32 timeout) __ksym;

/* The one field of the kernel's struct nf_conn the programs read (and write, on an entry of their own):
 * its mark, located by CO-RE against the kernel's BTF. */
struct nf_conn___mark {
	__u32 mark;
} __attribute__((preserve_access_index));

/* The conntrack mark of the entries eniwire inserts for the fast-path flows of pods a policy isolates
 * (policy.h): the host never carries those flows, whatever conntrack knows of them. ENIWIRE_CT_TAG in the
 * top byte says the entry is eniwire's; ENIWIRE_CT_CLOSING says a TCP FIN or RST of the flow has passed,
 * ENIWIRE_CT_RESET that an RST did (policy.h, ct_timeout); the low 22 bits hold the policy generation under
 * which the flow was last judged
 * (policy.h, policy_generation), so an established flow is judged again only after a policy changed.
 * ENIWIRE_CT_MARK_V0 is the mark of the entries agents before the generation inserted: still eniwire's,
 * judged on their next packet. */
#define ENIWIRE_CT_TAG 0xe1000000u
#define ENIWIRE_CT_TAG_MASK 0xff000000u
#define ENIWIRE_CT_CLOSING 0x00800000u
#define ENIWIRE_CT_RESET 0x00400000u
#define ENIWIRE_CT_CLOSE_MASK (ENIWIRE_CT_CLOSING | ENIWIRE_CT_RESET)
#define ENIWIRE_CT_GENERATION_MASK 0x003fffffu
#define ENIWIRE_CT_MARK_V0 0x0e1e0001u

/* ct_mark_of is the mark of an entry judged under generation, closing being its ENIWIRE_CT_CLOSE_MASK bits. */
static __always_inline __u32 ct_mark_of(__u32 generation, __u32 closing)
{
	return ENIWIRE_CT_TAG | closing | (generation & ENIWIRE_CT_GENERATION_MASK);
}

static __always_inline int ct_is_eniwire(struct nf_conn *ct)
{
	__u32 mark = ((struct nf_conn___mark *)ct)->mark;
	return (mark & ENIWIRE_CT_TAG_MASK) == ENIWIRE_CT_TAG || mark == ENIWIRE_CT_MARK_V0;
}

enum flow_path {
	/* The packet's route decides: ICMP echo and other ICMP queries, which conntrack keys by id, not
	 * ports, and the kfuncs cannot look up. kube-proxy translates no ICMP, so such flows never have a
	 * translated direction; the route alone gives both directions one path. */
	FLOW_ROUTED = 0,
	/* TCP or UDP: conntrack knows whether the host carries the flow. */
	FLOW_LOOKUP = 1,
	/* Always the host: fragments (only the first carries ports, and the host reassembles when it
	 * tracks), and protocols the kfuncs cannot look up (SCTP, GRE, ...). Both directions of such a flow
	 * go to the host, so the host sees it whole. */
	FLOW_HOST = 2,
};

/* A flow as conntrack keys it: the tuple of one direction. */
struct flow {
	struct bpf_sock_tuple tuple; /* tuple.ipv4 or tuple.ipv6 by family; ports in network order */
	__u8 protocol;
	__u8 family; /* FAMILY_IPV4 or FAMILY_IPV6 */
	enum flow_path path;
};

/* flow_set fills a flow's tuple: from src:sport to dst:dport, in the flow's family. */
static __always_inline void flow_set(struct flow *f, const struct ip_addr *src, const struct ip_addr *dst,
				     __be16 sport, __be16 dport)
{
	if (f->family == FAMILY_IPV6) {
		__builtin_memcpy(f->tuple.ipv6.saddr, src->addr, 16);
		__builtin_memcpy(f->tuple.ipv6.daddr, dst->addr, 16);
		f->tuple.ipv6.sport = sport;
		f->tuple.ipv6.dport = dport;
		return;
	}
	f->tuple.ipv4.saddr = ((const __u32 *)src->addr)[3];
	f->tuple.ipv4.daddr = ((const __u32 *)dst->addr)[3];
	f->tuple.ipv4.sport = sport;
	f->tuple.ipv4.dport = dport;
}

/* flow_ends reads a flow's tuple back: its addresses (IPv4-mapped for IPv4) and ports. */
static __always_inline void flow_ends(struct flow *f, struct ip_addr *src, struct ip_addr *dst, __be16 *sport,
				      __be16 *dport)
{
	if (f->family == FAMILY_IPV6) {
		__builtin_memcpy(src->addr, f->tuple.ipv6.saddr, 16);
		__builtin_memcpy(dst->addr, f->tuple.ipv6.daddr, 16);
		*sport = f->tuple.ipv6.sport;
		*dport = f->tuple.ipv6.dport;
		return;
	}
	ip_addr_from_v4(src, f->tuple.ipv4.saddr);
	ip_addr_from_v4(dst, f->tuple.ipv4.daddr);
	*sport = f->tuple.ipv4.sport;
	*dport = f->tuple.ipv4.dport;
}

/* flow_reverse turns a flow's tuple around: the same flow seen from its other end. */
static __always_inline void flow_reverse(struct flow *f)
{
	struct ip_addr src, dst;
	__be16 sport, dport;
	flow_ends(f, &src, &dst, &sport, &dport);
	flow_set(f, &dst, &src, dport, sport);
}

/* ports_at reads the source and destination ports at off; TCP and UDP both start with them. */
static __always_inline int ports_at(struct __sk_buff *skb, __u32 off, __be16 ports[2])
{
	return bpf_skb_load_bytes(skb, off, ports, 2 * sizeof(__be16));
}

/* flow_of_icmp_error: an ICMP error belongs to the flow of the packet it quotes, and travels against it:
 * the quoted packet went from B to A, the error goes from A's side back to B. Its flow is the quoted tuple
 * reversed, which is also what conntrack does with errors (RELATED to that entry). An ICMPv6 error quotes
 * the fixed IPv6 header; one that quotes a fragment header or another extension header goes to the host. */
static __always_inline void flow_of_icmp6_error(struct __sk_buff *skb, struct packet *p, struct flow *f)
{
	struct ipv6_head inner;
	__u32 off = p->l4_off + sizeof(struct icmp_head);

	f->path = FLOW_HOST;
	if (bpf_skb_load_bytes(skb, off, &inner, sizeof(inner)) < 0 || (inner.version_class >> 4) != 6)
		return;
	switch (inner.nexthdr) {
	case IPPROTO_TCP:
	case IPPROTO_UDP: {
		__be16 ports[2];
		if (ports_at(skb, off + IPV6_HLEN, ports) < 0)
			return;
		struct ip_addr s, d;
		__builtin_memcpy(s.addr, inner.saddr, 16);
		__builtin_memcpy(d.addr, inner.daddr, 16);
		f->protocol = inner.nexthdr;
		flow_set(f, &d, &s, ports[1], ports[0]);
		f->path = FLOW_LOOKUP;
		return;
	}
	case IPPROTO_ICMPV6_:
		f->path = FLOW_ROUTED;
		return;
	}
}

static __always_inline void flow_of_icmp_error(struct __sk_buff *skb, struct packet *p, struct flow *f)
{
	struct iphdr inner;
	__u32 off = p->l4_off + sizeof(struct icmp_head);

	f->path = FLOW_HOST;
	if (bpf_skb_load_bytes(skb, off, &inner, sizeof(inner)) < 0 || inner.version != 4 || inner.ihl < 5)
		return;
	if (inner.frag_off & bpf_htons(IP_OFFSET))
		return;
	off += inner.ihl * 4;
	switch (inner.protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP: {
		__be16 ports[2];
		if (ports_at(skb, off, ports) < 0)
			return;
		f->protocol = inner.protocol;
		f->tuple.ipv4.saddr = inner.daddr;
		f->tuple.ipv4.daddr = inner.saddr;
		f->tuple.ipv4.sport = ports[1];
		f->tuple.ipv4.dport = ports[0];
		f->path = FLOW_LOOKUP;
		return;
	}
	case IPPROTO_ICMP:
		f->path = FLOW_ROUTED;
		return;
	}
}

/* flow_of says which flow a packet belongs to and how its path is decided. */
static __always_inline void flow_of(struct __sk_buff *skb, struct packet *p, struct flow *f)
{
	__builtin_memset(f, 0, sizeof(*f));
	f->family = p->family;
	if (p->fragment) {
		f->path = FLOW_HOST;
		return;
	}
	switch (p->protocol) {
	case IPPROTO_TCP:
	case IPPROTO_UDP: {
		__be16 ports[2];
		if (ports_at(skb, p->l4_off, ports) < 0) {
			/* Cut inside its L4 header: no flow any host could track; routed by address. */
			f->path = FLOW_ROUTED;
			return;
		}
		f->protocol = p->protocol;
		flow_set(f, &p->src, &p->dst, ports[0], ports[1]);
		f->path = FLOW_LOOKUP;
		return;
	}
	case IPPROTO_ICMPV6_: {
		__u8 type = 0;
		if (p->family != FAMILY_IPV6 || bpf_skb_load_bytes(skb, p->l4_off, &type, 1) < 0) {
			f->path = FLOW_ROUTED;
			return;
		}
		switch (type) {
		case ICMPV6_DEST_UNREACH:
		case ICMPV6_PKT_TOOBIG:
		case ICMPV6_TIME_EXCEED:
		case ICMPV6_PARAMPROB:
			flow_of_icmp6_error(skb, p, f);
			return;
		}
		/* Echo and the other informational messages: as ICMP queries. */
		f->path = FLOW_ROUTED;
		return;
	}
	case IPPROTO_ICMP: {
		if (p->family != FAMILY_IPV4) {
			f->path = FLOW_HOST;
			return;
		}
		struct icmp_head icmp;
		if (bpf_skb_load_bytes(skb, p->l4_off, &icmp, sizeof(icmp)) < 0) {
			f->path = FLOW_ROUTED;
			return;
		}
		switch (icmp.type) {
		case ICMP_DEST_UNREACH:
		case ICMP_SOURCE_QUENCH:
		case ICMP_REDIRECT:
		case ICMP_TIME_EXCEEDED:
		case ICMP_PARAMETERPROB:
			flow_of_icmp_error(skb, p, f);
			return;
		}
		f->path = FLOW_ROUTED;
		return;
	}
	}
	f->path = FLOW_HOST;
}

/* first_fragment_flow fills f with the TCP or UDP flow of a first fragment, which carries the ports (its
 * path stays FLOW_HOST: the host reassembles it). It returns 0 when it did. */
static __always_inline int first_fragment_flow(struct __sk_buff *skb, struct packet *p, struct flow *f)
{
	__be16 ports[2];
	if (p->fragment != FRAGMENT_FIRST || (p->protocol != IPPROTO_TCP && p->protocol != IPPROTO_UDP) ||
	    ports_at(skb, p->l4_off, ports) < 0)
		return -1;
	f->protocol = p->protocol;
	flow_set(f, &p->src, &p->dst, ports[0], ports[1]);
	return 0;
}

/* ct_lookup looks the flow up in conntrack; the caller releases what it returns. *dir is the direction of
 * the packet's tuple in the entry (0 original, 1 reply). */
static __always_inline struct nf_conn *ct_lookup(struct __sk_buff *skb, struct flow *f, __u8 *dir)
{
	struct ct_opts opts = {.netns_id = BPF_F_CURRENT_NETNS, .l4proto = f->protocol};
	struct nf_conn *ct;
	if (f->family == FAMILY_IPV6)
		ct = bpf_skb_ct_lookup(skb, &f->tuple, sizeof(f->tuple.ipv6), &opts, sizeof(opts));
	else
		ct = bpf_skb_ct_lookup(skb, &f->tuple, sizeof(f->tuple.ipv4), &opts, sizeof(opts));
	*dir = opts.dir;
	return ct;
}
