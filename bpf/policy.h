/* SPDX-License-Identifier: GPL-2.0 */
/* NetworkPolicy: whether a flow may open, judged on the tuple of its first packet (opener -> responder, the
 * responder's port), against the egress policy of the opener and the ingress policy of the responder when
 * they are pods of this node. maps.h says how the state is laid out and why each judgment costs the same
 * whatever the number of rules; eniwire.c says when a packet is judged (flow_detour). */
#pragma once

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

#include "maps.h"
#include "packet.h"
#include "flow.h"

#define ISOLATED (POLICY_EGRESS_ISOLATED | POLICY_INGRESS_ISOLATED)

/* side_allows says whether the policy in a pod's flags lets a flow with peer, on protocol and port, open in
 * direction dir. A pod not isolated in that direction allows everything. */
static __always_inline int side_allows(__u32 flags, enum policy_direction dir, const struct ip_addr *peer, __u8 protocol,
				       __be16 port)
{
	__u32 isolated = dir == POLICY_INGRESS ? POLICY_INGRESS_ISOLATED : POLICY_EGRESS_ISOLATED;
	if (!(flags & isolated))
		return 1;
	__u32 id = flags & POLICY_ID_MASK;
	struct policy_peer_set_ids *sets = bpf_map_lookup_elem(&policy_peer_sets, &id);
	if (!sets)
		return 0;
	struct policy_peer_key pk;
	__builtin_memset(&pk, 0, sizeof(pk));
	pk.prefixlen = POLICY_PEER_KEY_BITS;
	pk.peer_set = dir == POLICY_INGRESS ? sets->ingress : sets->egress;
	pk.direction = dir;
	pk.peer = *peer;
	struct policy_peer_value *pv = bpf_map_lookup_elem(&policy_peers, &pk);
	if (!pv || !pv->port_set)
		return 0;
	struct policy_port_key kk;
	__builtin_memset(&kk, 0, sizeof(kk));
	kk.prefixlen = POLICY_PORT_KEY_BITS;
	kk.policy_id = id;
	kk.port_set = pv->port_set;
	kk.protocol = protocol;
	kk.port = port;
	struct policy_port_value *allowed = bpf_map_lookup_elem(&policy_ports, &kk);
	return allowed && allowed->allowed;
}

/* policy_generation_now is the policy generation (maps.h): read before the pods' flags, so a flow judged on
 * flags older than a change never carries the generation that followed it. */
static __always_inline __u32 policy_generation_now(void)
{
	__u32 zero = 0;
	__u32 *g = bpf_map_lookup_elem(&policy_generation, &zero);
	return g ? *g : 0;
}

enum policy_result {
	POLICY_ALLOWED = 0,
	POLICY_EGRESS_DENIED = 1,  /* the opener's egress policy allows no such flow */
	POLICY_INGRESS_DENIED = 2, /* the responder's ingress policy allows no such flow */
};

/* A flow as it opened: its opener, its responder and the responder's port, with each end's pod flags (0
 * for an address that is not a pod of this node). Addresses as the maps keep them: IPv4-mapped for IPv4, so
 * an IPv6 flow is judged on the same entries, an IPv6 ipBlock's prefix matching IPv6 peers only. */
struct opening {
	struct ip_addr opener, responder;
	__u32 opener_flags, responder_flags;
	__u8 protocol;
	__be16 port;
};

static __always_inline enum policy_result judge(struct opening *o)
{
	if (!side_allows(o->opener_flags, POLICY_EGRESS, &o->responder, o->protocol, o->port))
		return POLICY_EGRESS_DENIED;
	if (!side_allows(o->responder_flags, POLICY_INGRESS, &o->opener, o->protocol, o->port))
		return POLICY_INGRESS_DENIED;
	return POLICY_ALLOWED;
}

/* report_denial sends a denied new flow to policy_denials, within the CPU's budget of DENIALS_PER_SECOND. */
static __always_inline void report_denial(struct opening *o, enum policy_result r, enum verdict verdict)
{
	__u32 zero = 0;
	struct denial_budget *b = bpf_map_lookup_elem(&denial_budgets, &zero);
	if (!b)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (now - b->window_start_ns >= 1000000000ull) {
		b->window_start_ns = now;
		b->sent = 0;
	}
	if (b->sent >= DENIALS_PER_SECOND)
		return;
	b->sent++;
	struct policy_denial e;
	__builtin_memset(&e, 0, sizeof(e));
	int egress = r == POLICY_EGRESS_DENIED;
	e.pod = egress ? o->opener : o->responder;
	e.peer = egress ? o->responder : o->opener;
	e.flags = egress ? o->opener_flags : o->responder_flags;
	e.verdict = verdict;
	e.direction = egress ? POLICY_EGRESS : POLICY_INGRESS;
	e.port = bpf_ntohs(o->port);
	e.protocol = o->protocol;
	bpf_ringbuf_output(&policy_denials, &e, sizeof(e), 0);
}

/* How long eniwire's conntrack entry of a fast-path flow lives without a packet, in milliseconds; every
 * packet the policy still allows renews it (ct_renew). TCP as long as Cilium keeps an idle connection (6
 * hours); once a FIN is seen, for every later packet too, as the kernel's conntrack keeps a closing
 * connection (nf_conntrack_tcp_timeout_fin_wait and _time_wait, 2 minutes: a half-closed connection whose
 * other side still sends lives on, and the last ACK of a close does not give the entry 6 hours back); a
 * packet with RST, and every later one, as the kernel's closed state (_close, 10 seconds); UDP as the kernel's "stream" UDP
 * timeout. */
#define CT_TIMEOUT_TCP_MS (6u * 3600 * 1000)
#define CT_TIMEOUT_TCP_CLOSING_MS (120u * 1000)
#define CT_TIMEOUT_TCP_RESET_MS (10u * 1000)
#define CT_TIMEOUT_UDP_MS (120u * 1000)

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10

/* tcp_flags reads a TCP packet's flags; 0 for what is not TCP. */
static __always_inline __u8 tcp_flags(struct __sk_buff *skb, struct packet *p)
{
	__u8 flags = 0;
	if (p->protocol != IPPROTO_TCP || bpf_skb_load_bytes(skb, p->l4_off + 13, &flags, 1) < 0)
		return 0;
	return flags;
}

/* tcp_opens says whether a TCP packet opens its flow: a SYN without ACK. */
static __always_inline int tcp_opens(struct __sk_buff *skb, struct packet *p)
{
	return (tcp_flags(skb, p) & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
}

/* ct_closing_after is the closing bits (ENIWIRE_CT_CLOSE_MASK) of a flow's entry of eniwire's after packet
 * p, the bits being before (0 for a new entry): a TCP FIN makes the flow closing, an RST closed; a SYN
 * without ACK opens the tuple anew (a client reusing its port). */
static __always_inline __u32 ct_closing_after(struct __sk_buff *skb, struct packet *p, __u32 before)
{
	if (p->protocol != IPPROTO_TCP)
		return before;
	__u8 flags = tcp_flags(skb, p);
	if (flags & TCP_FLAG_RST)
		return ENIWIRE_CT_CLOSING | ENIWIRE_CT_RESET;
	if (flags & TCP_FLAG_FIN)
		return ENIWIRE_CT_CLOSING | (before & ENIWIRE_CT_RESET);
	if ((flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN)
		return 0;
	return before;
}

/* ct_timeout is how long a flow's entry lives after packet p (of the flow's own protocol), closing being its
 * closing bits after p. */
static __always_inline __u32 ct_timeout(struct packet *p, __u32 closing)
{
	if (p->protocol != IPPROTO_TCP)
		return CT_TIMEOUT_UDP_MS;
	if (closing & ENIWIRE_CT_RESET)
		return CT_TIMEOUT_TCP_RESET_MS;
	return closing ? CT_TIMEOUT_TCP_CLOSING_MS : CT_TIMEOUT_TCP_MS;
}

/* ct_renew renews an entry of eniwire's on a packet of its flow allowed under generation: the mark says
 * the flow was judged under it, and whether it is closing. */
static __always_inline void ct_renew(struct __sk_buff *skb, struct packet *p, struct nf_conn *ct, __u32 generation)
{
	struct nf_conn___mark *m = (struct nf_conn___mark *)ct;
	__u32 before = m->mark;
	__u32 closing = ct_closing_after(skb, p, before == ENIWIRE_CT_MARK_V0 ? 0 : before & ENIWIRE_CT_CLOSE_MASK);
	__u32 mark = ct_mark_of(generation, closing);
	if (mark != before)
		m->mark = mark;
	bpf_ct_change_timeout(ct, ct_timeout(p, closing));
}

/* IPS_SEEN_REPLY | IPS_ASSURED: an entry conntrack's early drop spares when its table is full. */
#define CT_STATUS_ASSURED ((1u << 1) | (1u << 2))

extern int bpf_ct_set_status(struct nf_conn___init *ct, __u32 status) __ksym;

/* ct_insert gives a fast-path flow of an isolated pod an entry of eniwire's in the kernel's conntrack, in
 * the direction it opened: the one flow table, which outlives the agent. The mark holds the policy
 * generation the flow was judged under. It returns 0 when the flow has an entry now (this one, or the one
 * another CPU inserted first for the same flow), -1 when it has none: conntrack's table is full (or out of
 * memory), and the caller drops the packet rather than let a flow open whose replies it could not tell
 * from strangers. */
static __always_inline int ct_insert(struct __sk_buff *skb, struct packet *p, struct flow *f, __u32 generation)
{
	__u32 closing = ct_closing_after(skb, p, 0);
	struct ct_opts opts = {.netns_id = BPF_F_CURRENT_NETNS, .l4proto = f->protocol};
	struct nf_conn___init *n;
	if (f->family == FAMILY_IPV6)
		n = bpf_skb_ct_alloc(skb, &f->tuple, sizeof(f->tuple.ipv6), &opts, sizeof(opts));
	else
		n = bpf_skb_ct_alloc(skb, &f->tuple, sizeof(f->tuple.ipv4), &opts, sizeof(opts));
	if (!n)
		return -1;
	((struct nf_conn___mark *)n)->mark = ct_mark_of(generation, closing);
	bpf_ct_set_timeout(n, ct_timeout(p, closing));
	bpf_ct_set_status(n, CT_STATUS_ASSURED);
	struct nf_conn *ct = bpf_ct_insert_entry(n);
	if (ct) {
		bpf_ct_release(ct);
		return 0;
	}
	/* A clash: another CPU inserted the same flow first. Anything else left no entry. */
	__u8 dir = 0;
	ct = ct_lookup(skb, f, &dir);
	if (!ct)
		return -1;
	bpf_ct_release(ct);
	return 0;
}
