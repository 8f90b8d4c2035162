//go:build ignore
/* SPDX-License-Identifier: GPL-2.0 */
/* eniwire's programs: the tc programs eniw_from_pod on each pod's host veth (ingress), eniw_to_vpc on every
 * managed ENI (egress), eniw_to_pod on every managed ENI (ingress), and eniw_forward, a netfilter program at
 * the node's IPv4 and IPv6 FORWARD hooks. Every decision is a hash, LPM or conntrack lookup, so the cost per packet
 * does not grow with the number of pods, nor with the size of the NetworkPolicy of a pod (policy.h).
 *
 * NetworkPolicy on the fast paths: before a packet takes one, its flow is judged against the policies of
 * the pods at either end (flow_detour), and a denied packet is dropped, never detoured to the host.
 *
 * The fast paths (redirect_peer into a pod, redirect_neigh out of an ENI) behave as a router, for IPv4 and
 * IPv6 alike (packet.h parses both into one struct packet): a packet of a flow the host carries goes to the
 * host (flow.h), the TTL or hop limit is decremented and a packet about to expire goes to the host, which
 * answers with ICMP or ICMPv6 time exceeded; a packet too big for the next hop goes to the host, which
 * fragments it or answers fragmentation needed (IPv4) or Packet Too Big (IPv6); a packet with IPv4 options,
 * a bad IPv4 header checksum or an IPv6 hop-by-hop header goes to the host, which acts on it as a Linux
 * router does.
 *
 * What they count (maps.h): every packet under one verdict of the program that saw it; a redirect is
 * counted when the helper accepts it, so a packet the kernel still drops afterwards (the pod's interface
 * down, a gateway that does not answer ARP) is counted as redirected. Per pod, tx counts what a pod sent
 * from its own address and rx what the fast paths redirected towards it; what reaches a pod through the
 * host stack is in neither.
 *
 * A packet passed on returns TC_ACT_UNSPEC (tcx "next"): a program attached after eniwire on the same hook
 * still sees it, and with none the kernel carries on as with TC_ACT_OK. */

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "maps.h"
#include "packet.h"
#include "flow.h"
#include "policy.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

#define ETH_P_ARP_ 0x0806
#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8

/* Set by the loader before load (datapath.Config.SNAT). When off, every destination that is neither a pod
 * of this node nor a host route leaves by the pod's ENI, as with AWS_VPC_K8S_CNI_EXTERNALSNAT. When on, such
 * a destination goes to the host, and so does a packet from such a source (source_detour). */
volatile const __u8 snat_enabled = 1;

/* count adds a packet to its verdict's counter. */
static __always_inline void count(enum verdict verdict, __u32 len)
{
	struct counter *c = bpf_map_lookup_elem(&counters, &verdict);
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

/* count_pod adds a packet to a pod's traffic: sent by it (rx 0) or redirected towards it (rx 1). */
static __always_inline void count_pod(struct ip_addr *pod, __u32 len, int rx)
{
	struct pod_traffic *s = bpf_map_lookup_elem(&pod_stats, pod);
	if (!s) {
		struct pod_traffic zero = {};
		bpf_map_update_elem(&pod_stats, pod, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&pod_stats, pod);
		if (!s)
			return;
	}
	if (rx) {
		s->rx_packets++;
		s->rx_bytes += len;
	} else {
		s->tx_packets++;
		s->tx_bytes += len;
	}
}

/* Why a packet that its route would put on a fast path goes elsewhere. */
enum detour {
	DETOUR_NONE = 0,
	DETOUR_EGRESS_DENIED,  /* a policy isolating the opener of its flow allows no such flow: dropped */
	DETOUR_INGRESS_DENIED, /* a policy isolating the responder of its flow allows no such flow: dropped */
	DETOUR_IP_HEADER, /* its IPv4 header is one a router acts on: options, or a bad checksum */
	DETOUR_IPV6_HEADER, /* its IPv6 header is followed by hop-by-hop options, which a router reads */
	DETOUR_HOST_FLOW, /* its flow is the host's */
	DETOUR_TTL,       /* it would expire at this hop */
	DETOUR_TOO_BIG,   /* it does not fit the next hop's MTU */
	DETOUR_NO_DEVICE, /* the interface it would be redirected to is gone */
	DETOUR_CT_FULL,   /* it would open a flow of an isolated pod, and conntrack has no room for its entry: dropped */
};

/* ip_header_needs_host says whether a packet's IPv4 header is one a router acts on, which the fast paths
 * cannot: any option (a router records its address in Record Route and timestamps, follows a source route
 * only when accept_source_route allows, which Linux does not by default, and delivers Router Alert
 * locally; no common stack sends options, so they cost the fast path nothing), or a header checksum that
 * does not verify (a router drops the packet). The host does with them what a Linux router does. */
static __always_inline int ip_header_needs_host(struct __sk_buff *skb, struct packet *p)
{
	__u16 words[sizeof(struct iphdr) / 2];

	if (p->l4_off != ETH_HLEN_ + sizeof(struct iphdr))
		return 1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN_, words, sizeof(words)) < 0)
		return 1;
	/* The one's complement sum of a valid header, its checksum included, is 0xffff (in either byte order). */
	__u32 sum = 0;
	for (int i = 0; i < (int)(sizeof(words) / 2); i++)
		sum += words[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum != 0xffff;
}

/* The verdicts a program counts a fast-path packet under: delivered, why it detoured to the host, or what
 * the policy said of it. */
struct fast_verdicts {
	enum verdict delivered, ip_header, ipv6_header, host_flow, ttl, too_big;
	enum verdict egress_denied, ingress_denied, egress_allowed, ingress_allowed;
	enum verdict ct_full;
};

/* The pod flags (maps.h) of a packet's source and destination: 0 for an address that is not a pod of this
 * node, or a pod no policy selects. */
struct ends {
	__u32 src_flags, dst_flags;
	__u32 generation; /* the policy generation, read before the flags (policy_generation_now) */
};

static __always_inline enum detour denial(enum policy_result r)
{
	switch (r) {
	case POLICY_EGRESS_DENIED:
		return DETOUR_EGRESS_DENIED;
	case POLICY_INGRESS_DENIED:
		return DETOUR_INGRESS_DENIED;
	default:
		return DETOUR_NONE;
	}
}

/* count_opening counts a flow the policies allowed to open, under each direction that a policy isolates. */
static __always_inline void count_opening(struct opening *o, struct fast_verdicts v, __u32 len)
{
	if (o->opener_flags & POLICY_EGRESS_ISOLATED)
		count(v.egress_allowed, len);
	if (o->responder_flags & POLICY_INGRESS_ISOLATED)
		count(v.ingress_allowed, len);
}

/* opening_of is the opening of the flow of a packet whose tuple is t: t itself when the packet travels in
 * the flow's original direction, t reversed when it is a reply. */
static __always_inline struct opening opening_of(struct packet *p, struct ends e, const struct ip_addr *saddr,
						 const struct ip_addr *daddr, __be16 sport, __be16 dport, __u8 protocol,
						 int reply)
{
	struct opening o = {.protocol = protocol};
	o.opener = reply ? *daddr : *saddr;
	o.responder = reply ? *saddr : *daddr;
	o.port = reply ? sport : dport;
	o.opener_flags = ip_addr_eq(&o.opener, &p->src) ? e.src_flags : ip_addr_eq(&o.opener, &p->dst) ? e.dst_flags : 0;
	o.responder_flags =
		ip_addr_eq(&o.responder, &p->src) ? e.src_flags : ip_addr_eq(&o.responder, &p->dst) ? e.dst_flags : 0;
	return o;
}

/* How a packet without conntrack state from tc is judged (stateless_way). */
enum stateless_way {
	STATELESS_REQUEST = 0, /* on its own tuple, as a flow's opening */
	STATELESS_EITHER = 1,  /* either way: an SCTP packet other than an INIT, inside an association */
};

#define SCTP_CHUNK_INIT 1

/* stateless_way tells an SCTP INIT, which opens an association, from the packets inside one. A packet that
 * cannot say is a request: the way that asks the most of the policies. */
static __always_inline enum stateless_way stateless_way(struct __sk_buff *skb, struct packet *p)
{
	__u8 type = 0;
	/* The first chunk follows the 12-byte common header. */
	if (p->protocol != IPPROTO_SCTP || p->fragment || bpf_skb_load_bytes(skb, p->l4_off + 12, &type, 1) < 0 ||
	    type == SCTP_CHUNK_INIT)
		return STATELESS_REQUEST;
	return STATELESS_EITHER;
}

/* judge_stateless judges a packet of an isolated pod that conntrack cannot hold from tc: SCTP (which the
 * host tracks, the kfuncs cannot look up), other protocols, first fragments. A later fragment carries
 * no ports and passes; the host reassembles it with its first fragment, which was judged. */
static __always_inline enum detour judge_stateless(struct __sk_buff *skb, struct packet *p, struct ends e,
						   struct fast_verdicts v)
{
	if (p->fragment == FRAGMENT_LATER)
		return DETOUR_NONE;
	__be16 ports[2] = {};
	if (p->protocol == IPPROTO_TCP || p->protocol == IPPROTO_UDP || p->protocol == IPPROTO_SCTP)
		if (ports_at(skb, p->l4_off, ports) < 0)
			ports[0] = ports[1] = 0;
	enum stateless_way way = stateless_way(skb, p);
	struct opening o = opening_of(p, e, &p->src, &p->dst, ports[0], ports[1], p->protocol, 0);
	enum policy_result r = judge(&o);
	if (r != POLICY_ALLOWED && way == STATELESS_EITHER) {
		struct opening back = opening_of(p, e, &p->src, &p->dst, ports[0], ports[1], p->protocol, 1);
		if (judge(&back) == POLICY_ALLOWED) {
			o = back;
			r = POLICY_ALLOWED;
		}
	}
	if (r != POLICY_ALLOWED) {
		report_denial(&o, r, r == POLICY_EGRESS_DENIED ? v.egress_denied : v.ingress_denied);
		return denial(r);
	}
	count_opening(&o, v, p->len);
	return DETOUR_NONE;
}

/* Linux's default ip_local_port_range begins here: a client's port is at or above it, a server's usually below. */
#define EPHEMERAL_PORT_FIRST 32768

/* midstream_receiver_opened says which end opened a TCP flow of which a packet arrives with no entry and
 * opens nothing (no SYN, or a SYN-ACK): the flow began before its pod was isolated (or its entry expired),
 * and no packet says who opened it. Taking the sender, as conntrack's loose pickup does, would record a
 * client's flow as the server's when the server sends first (pushing data), and a later revocation on the
 * server's ingress would never cut it. The opener is taken to be the end with the ephemeral port when just
 * one end has one; else the one direction the policies allow, when just one is; else the end with the
 * higher port. It returns 1 when that is the packet's receiver. */
static __always_inline int midstream_receiver_opened(struct packet *p, struct ends e, const struct ip_addr *saddr,
						     const struct ip_addr *daddr, __be16 sport, __be16 dport)
{
	__u16 s = bpf_ntohs(sport), d = bpf_ntohs(dport);
	int s_ephemeral = s >= EPHEMERAL_PORT_FIRST, d_ephemeral = d >= EPHEMERAL_PORT_FIRST;
	if (s_ephemeral != d_ephemeral)
		return d_ephemeral;
	struct opening sent = opening_of(p, e, saddr, daddr, sport, dport, IPPROTO_TCP, 0);
	struct opening received = opening_of(p, e, saddr, daddr, sport, dport, IPPROTO_TCP, 1);
	int sent_allowed = judge(&sent) == POLICY_ALLOWED, received_allowed = judge(&received) == POLICY_ALLOWED;
	if (sent_allowed != received_allowed)
		return received_allowed;
	return d > s;
}

/* flow_detour takes the one conntrack lookup of a packet's flow and says what it means:
 *   - an entry of the host's: the host carries the flow (DETOUR_HOST_FLOW), policy or not;
 *   - an entry of eniwire's: the flow is on the fast path; when a pod's policy changed since it was judged
 *     (its mark's generation is not the current one), its pods' policies are judged again on the flow's
 *     opening, whichever way this packet travels, so a removed allow cuts it; allowed, the entry lives on
 *     and takes the current generation;
 *   - none, with a pod at either end isolated: a new flow, judged on this packet's tuple and, allowed,
 *     given an entry of eniwire's (ct_insert) so that its replies pass; when conntrack has no room for it,
 *     the packet is dropped, counted as ct_full, so the flow opens in neither direction;
 *   - none, a pod isolated, and a TCP packet that opens nothing (no SYN, or a SYN-ACK): the middle of a flow
 *     that began before its pod was isolated (or whose entry expired), whose opener no packet says. It is
 *     judged as opened by the end midstream_receiver_opened takes for the client, and allowed, given an
 *     entry in that direction, not in the direction of whoever sent first, so that a later revocation is
 *     judged against the right side; a SYN against an entry's direction is judged as an opening of its own;
 *   - none, no pod isolated: the fast path as without policy, no state kept.
 * ICMP of an isolated pod goes to the host (DETOUR_HOST_FLOW), whose conntrack ties an echo reply to its
 * request and an error to the flow it quotes; eniw_forward judges it there on the flow it belongs to, as it
 * judges SCTP, and an echo reply or an error that belongs to no flow is judged as an opening of its own.
 * An ICMP error about a fast-path flow (one eniwire holds an entry of) is judged with that flow and renews
 * nothing. A first fragment of a TCP or UDP flow is judged as a packet of its flow when a pod is isolated
 * (it carries the ports; a fragmented reply passes as a reply), then goes to the host, which reassembles
 * it; it opens no entry. */
static __always_inline enum detour flow_detour(struct __sk_buff *skb, struct packet *p, struct ends e,
					       struct fast_verdicts v)
{
	struct flow f;
	int isolated = ((e.src_flags | e.dst_flags) & ISOLATED) != 0;

	flow_of(skb, p, &f);
	int fragment = isolated && f.path == FLOW_HOST && first_fragment_flow(skb, p, &f) == 0;
	enum detour allowed = fragment ? DETOUR_HOST_FLOW : DETOUR_NONE;
	int icmp = p->protocol == IPPROTO_ICMP || p->protocol == IPPROTO_ICMPV6_;
	if (f.path != FLOW_LOOKUP && !fragment) {
		if (isolated) {
			if (icmp)
				return DETOUR_HOST_FLOW;
			enum detour d = judge_stateless(skb, p, e, v);
			if (d != DETOUR_NONE)
				return d;
		}
		return f.path == FLOW_HOST ? DETOUR_HOST_FLOW : DETOUR_NONE;
	}
	struct ip_addr saddr, daddr;
	__be16 sport, dport;
	flow_ends(&f, &saddr, &daddr, &sport, &dport);
	__u8 dir = 0;
	struct nf_conn *ct = ct_lookup(skb, &f, &dir);
	if (ct) {
		if (!ct_is_eniwire(ct)) {
			bpf_ct_release(ct);
			return DETOUR_HOST_FLOW;
		}
		/* Judged under the current generation: no pod's policy changed since, the verdict stands. A SYN
		 * against the entry's direction opens a flow of its own, whoever the entry says opened the tuple
		 * (one taken up mid-stream may be the sender's): it is judged as the opening it is. */
		__u32 mark = ((struct nf_conn___mark *)ct)->mark;
		int reply = dir != 0, opens_back = reply && tcp_opens(skb, p);
		enum policy_result r = POLICY_ALLOWED;
		if (opens_back || (mark & ENIWIRE_CT_TAG_MASK) != ENIWIRE_CT_TAG ||
		    (mark & ENIWIRE_CT_GENERATION_MASK) != (e.generation & ENIWIRE_CT_GENERATION_MASK)) {
			struct opening o = opening_of(p, e, &saddr, &daddr, sport, dport, f.protocol, reply && !opens_back);
			r = judge(&o);
		}
		/* An ICMP error neither renews its flow's entry nor takes the current generation for it. */
		if (r == POLICY_ALLOWED && !icmp)
			ct_renew(skb, p, ct, e.generation);
		bpf_ct_release(ct);
		return r == POLICY_ALLOWED ? allowed : denial(r);
	}
	if (!isolated)
		return DETOUR_NONE;
	/* An ICMP error about a flow eniwire holds no entry of: the host's conntrack knows whether it belongs
	 * to one. */
	if (icmp)
		return DETOUR_HOST_FLOW;
	int receiver_opened = 0;
	if (f.protocol == IPPROTO_TCP && !fragment && !tcp_opens(skb, p))
		receiver_opened = midstream_receiver_opened(p, e, &saddr, &daddr, sport, dport);
	struct opening o = opening_of(p, e, &saddr, &daddr, sport, dport, f.protocol, receiver_opened);
	enum policy_result r = judge(&o);
	if (r != POLICY_ALLOWED) {
		report_denial(&o, r, r == POLICY_EGRESS_DENIED ? v.egress_denied : v.ingress_denied);
		return denial(r);
	}
	if (fragment)
		return allowed;
	/* The entry records the flow in the direction it was (taken to be) opened, so that every later packet,
	 * and a later revocation, is judged on that opening whichever end sends. */
	if (receiver_opened)
		flow_reverse(&f);
	if (ct_insert(skb, p, &f, e.generation) < 0) {
		count(v.ct_full, p->len);
		return DETOUR_CT_FULL;
	}
	count_opening(&o, v, p->len);
	return allowed;
}

/* detour_of says whether a packet may take the fast path to interface target_ifindex. The policies come
 * first, so no detour carries a denied packet to the host. Checking the device here is what makes
 * redirect_failed honest: the redirect helpers accept any ifindex and fail later. */
static __always_inline enum detour detour_of(struct __sk_buff *skb, struct packet *p, __u32 target_ifindex,
					     struct ends e, struct fast_verdicts v)
{
	enum detour d = flow_detour(skb, p, e, v);
	if (d == DETOUR_EGRESS_DENIED || d == DETOUR_INGRESS_DENIED || d == DETOUR_CT_FULL)
		return d;
	if (p->family == FAMILY_IPV6) {
		if (p->hop_by_hop)
			return DETOUR_IPV6_HEADER;
	} else if (ip_header_needs_host(skb, p))
		return DETOUR_IP_HEADER;
	if (d != DETOUR_NONE)
		return d;
	if (p->ttl <= 1)
		return DETOUR_TTL;
	__u32 mtu = 0;
	long rc = bpf_check_mtu(skb, target_ifindex, &mtu, 0, BPF_MTU_CHK_SEGS);
	if (rc < 0)
		return DETOUR_NO_DEVICE;
	if (rc != BPF_MTU_CHK_RET_SUCCESS)
		return DETOUR_TOO_BIG;
	return DETOUR_NONE;
}

/* redirect_neigh_eni sends the packet out of an ENI towards that ENI's subnet gateway, letting the
 * neighbour subsystem fill in the MACs. A packet of the other family than the ENI entry's gateway (IPv6 on
 * an ENI whose entry names its IPv4 gateway) goes to the next hop the kernel's FIB gives for its destination
 * out of that ENI: for IPv6, the VPC router's link-local address, from its Router Advertisements. */
static __always_inline long redirect_neigh_eni(__u32 eni_ifindex, struct eni_value *eni, __u8 family)
{
	struct bpf_redir_neigh nh = {};
	if (family == FAMILY_IPV6) {
		if (eni->family != AF_INET6)
			return bpf_redirect_neigh(eni_ifindex, NULL, 0, 0);
		nh.nh_family = AF_INET6;
		__builtin_memcpy(nh.ipv6_nh, eni->gateway.addr, sizeof(nh.ipv6_nh));
		return bpf_redirect_neigh(eni_ifindex, &nh, sizeof(nh), 0);
	}
	if (eni->family != AF_INET)
		return bpf_redirect_neigh(eni_ifindex, NULL, 0, 0);
	nh.nh_family = AF_INET;
	__builtin_memcpy(&nh.ipv4_nh, &eni->gateway.addr[12], sizeof(nh.ipv4_nh));
	return bpf_redirect_neigh(eni_ifindex, &nh, sizeof(nh), 0);
}

static __always_inline int finish_redirect(long rc, enum verdict verdict, __u32 len)
{
	if (rc == TC_ACT_REDIRECT) {
		count(verdict, len);
		return TC_ACT_REDIRECT;
	}
	count(VERDICT_REDIRECT_FAILED, len);
	return TC_ACT_SHOT;
}

/* from_pod_non_ip judges a pod's frame that is neither IPv4 nor IPv6 by its EtherType. ARP passes: the host
 * reaches a pod by a /32 route on its veth and resolves the pod's address with ARP, whose replies come back
 * this way (the pod's own gateway entry is static and needs none). Everything else is dropped: a VLAN tag
 * would hide a packet from these checks (see eniw_from_pod), and no other protocol has business with the
 * node. */
static __always_inline int from_pod_non_ip(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end) {
		count(VERDICT_FROM_POD_MALFORMED, skb->len);
		return TC_ACT_SHOT;
	}
	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP_):
		break;
	case bpf_htons(ETH_P_8021Q_):
	case bpf_htons(ETH_P_8021AD_):
		count(VERDICT_FROM_POD_VLAN, skb->len);
		return TC_ACT_SHOT;
	default:
		count(VERDICT_FROM_POD_ETHERTYPE, skb->len);
		return TC_ACT_SHOT;
	}
	count(VERDICT_FROM_POD_NON_IPV4, skb->len);
	return TC_ACT_UNSPEC;
}

/* write_failed drops, counted, a packet the fast path could not write (decrement_ttl). */
static __always_inline int write_failed(__u32 len)
{
	count(VERDICT_WRITE_FAILED, len);
	return TC_ACT_SHOT;
}

#define FROM_POD_DETOURS                                                                                     \
	.ip_header = VERDICT_FROM_POD_IP_HEADER, .ipv6_header = VERDICT_FROM_POD_IPV6_HEADER,                \
	.host_flow = VERDICT_FROM_POD_HOST_FLOW,                                                             \
	.ttl = VERDICT_FROM_POD_TTL, .too_big = VERDICT_FROM_POD_TOO_BIG,                                    \
	.egress_denied = VERDICT_FROM_POD_EGRESS_DENIED, .ingress_denied = VERDICT_FROM_POD_INGRESS_DENIED,  \
	.egress_allowed = VERDICT_FROM_POD_EGRESS_ALLOWED, .ingress_allowed = VERDICT_FROM_POD_INGRESS_ALLOWED, \
	.ct_full = VERDICT_FROM_POD_CT_FULL
static const struct fast_verdicts from_pod_to_peer = {.delivered = VERDICT_FROM_POD_TO_PEER, FROM_POD_DETOURS};
static const struct fast_verdicts from_pod_out_eni = {.delivered = VERDICT_FROM_POD_OUT_ENI, FROM_POD_DETOURS};
static const struct fast_verdicts to_pod_to_peer = {
	.delivered = VERDICT_TO_POD_TO_PEER,
	.ip_header = VERDICT_TO_POD_IP_HEADER,
	.ipv6_header = VERDICT_TO_POD_IPV6_HEADER,
	.host_flow = VERDICT_TO_POD_HOST_FLOW,
	.ttl = VERDICT_TO_POD_TTL,
	.too_big = VERDICT_TO_POD_TOO_BIG,
	.egress_denied = VERDICT_TO_POD_EGRESS_DENIED,
	.ingress_denied = VERDICT_TO_POD_INGRESS_DENIED,
	.egress_allowed = VERDICT_TO_POD_EGRESS_ALLOWED,
	.ingress_allowed = VERDICT_TO_POD_INGRESS_ALLOWED,
	.ct_full = VERDICT_TO_POD_CT_FULL,
};

/* take_detour counts a packet that may not take the fast path under its program's verdict for the reason,
 * and passes it to the host, or drops it when its target is gone. */
static __always_inline int take_detour(enum detour d, struct fast_verdicts v, __u32 len)
{
	switch (d) {
	case DETOUR_EGRESS_DENIED:
		count(v.egress_denied, len);
		return TC_ACT_SHOT;
	case DETOUR_INGRESS_DENIED:
		count(v.ingress_denied, len);
		return TC_ACT_SHOT;
	case DETOUR_CT_FULL:
		/* Counted where it was decided (flow_detour). */
		return TC_ACT_SHOT;
	case DETOUR_IP_HEADER:
		count(v.ip_header, len);
		return TC_ACT_UNSPEC;
	case DETOUR_IPV6_HEADER:
		count(v.ipv6_header, len);
		return TC_ACT_UNSPEC;
	case DETOUR_HOST_FLOW:
		count(v.host_flow, len);
		return TC_ACT_UNSPEC;
	case DETOUR_TTL:
		count(v.ttl, len);
		return TC_ACT_UNSPEC;
	case DETOUR_TOO_BIG:
		count(v.too_big, len);
		return TC_ACT_UNSPEC;
	default:
		count(VERDICT_REDIRECT_FAILED, len);
		return TC_ACT_SHOT;
	}
}

/* into_pod delivers a packet into the pod dst behind host veth host_ifindex (redirect_peer), as a router
 * hop, unless it must detour. */
static __always_inline int into_pod(struct __sk_buff *skb, struct packet *p, struct ip_addr *dst, __u32 host_ifindex,
				    struct ends e, struct fast_verdicts v)
{
	enum detour d = detour_of(skb, p, host_ifindex, e, v);
	if (d != DETOUR_NONE)
		return take_detour(d, v, p->len);
	if (decrement_ttl(skb, p) < 0)
		return write_failed(p->len);
	long rc = bpf_redirect_peer(host_ifindex, 0);
	if (rc == TC_ACT_REDIRECT)
		count_pod(dst, p->len, 1);
	return finish_redirect(rc, v.delivered, p->len);
}

/* Attach point: tc ingress (tcx, or clsact + cls_bpf) of each pod's host veth: every packet a pod sends. */
SEC("tc")
int eniw_from_pod(struct __sk_buff *skb)
{
	struct packet p;

	/* A pod's frames are untagged. The kernel moves a frame's outer VLAN tag into the skb before tc runs,
	 * and after it strips a tag of VLAN 0 that no VLAN device claims and takes the frame in again: a
	 * frame with two such tags would pass here as "not IPv4" and reach the IP stack behind every check
	 * below. So a tag, in the skb or in the frame (from_pod_non_ipv4), drops the frame. */
	if (skb->vlan_present) {
		count(VERDICT_FROM_POD_VLAN, skb->len);
		return TC_ACT_SHOT;
	}
	switch (parse_ip(skb, &p)) {
	case PARSE_OK:
		break;
	case PARSE_NOT_IP:
		return from_pod_non_ip(skb);
	default:
		count(VERDICT_FROM_POD_MALFORMED, skb->len);
		return TC_ACT_SHOT;
	}

	/* Of IPv6 neighbour discovery, solicitations and advertisements pass, whatever their source (the
	 * link-local or unspecified address they are sent from is no pod's): a pod's IPv6 stack exchanges them
	 * with the host's on the link, to resolve its gateway and to answer for its own addresses. Its router
	 * messages are dropped: a Router Advertisement or a Redirect would teach the node routes through the
	 * pod, and a Router Solicitation asks for a router the host veth never is (the host sends no
	 * advertisements on it). */
	if (p.nd) {
		if (p.nd == NDISC_NEIGHBOUR_SOLICITATION || p.nd == NDISC_NEIGHBOUR_ADVERTISEMENT) {
			count(VERDICT_FROM_POD_NON_IPV4, p.len);
			return TC_ACT_UNSPEC;
		}
		count(VERDICT_FROM_POD_IPV6, p.len);
		return TC_ACT_SHOT;
	}

	__u32 generation = policy_generation_now();
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &p.src);
	/* A known source is not enough: it must be the pod behind this veth, or any pod could send as another
	 * (and have its replies delivered there). At tc ingress skb->ifindex is the device the packet arrived
	 * on, the host end of the sender's veth. The pods map holds a pod's IPv6 address beside its IPv4 one,
	 * never its link-local address: what a pod sends from its link-local or the unspecified address but
	 * the neighbour discovery above (multicast listener reports, say, which every IPv6 stack sends) is
	 * dropped as IPv6, with or without an IPv6 address of its own: no business with the node over
	 * link-local IPv6 behind the address checks. Any other source is dropped as spoofed. */
	if (!pod || pod->host_ifindex != skb->ifindex) {
		int link_scope = !pod && p.family == FAMILY_IPV6 && ip_addr_is_link_scope(&p.src);
		count(link_scope ? VERDICT_FROM_POD_IPV6 : VERDICT_FROM_POD_SPOOF, p.len);
		return TC_ACT_SHOT;
	}
	count_pod(&p.src, p.len, 0);
	/* An address of no ENI: an IPv6 pod's node-local IPv4 egress address (169.254.172.0/22). Whatever it
	 * sends goes to the host, which translates it to the node's IPv4 (datapath/snat). */
	if (!pod->eni_ifindex) {
		count(VERDICT_FROM_POD_TO_HOST, p.len);
		return TC_ACT_UNSPEC;
	}

	/* A pod of a security-group set in strict mode, at either end, takes the VPC's way (POD_PATH_VPC). */
	__u32 vpc_only = pod->path & POD_PATH_VPC;
	struct pod_value *peer = bpf_map_lookup_elem(&pods, &p.dst);
	if (peer && peer->host_ifindex && !vpc_only && !(peer->path & POD_PATH_VPC))
		return into_pod(skb, &p, &p.dst, peer->host_ifindex, (struct ends){pod->flags, peer->flags, generation},
				from_pod_to_peer);

	struct route_key rk = {.prefixlen = 128, .dst = p.dst};
	struct route_value *route = bpf_map_lookup_elem(&routes, &rk);
	enum route_kind kind = route ? route->kind : 0;
	/* IPv6 is never translated: a pod's address is globally routable, and a destination in no route leaves
	 * by the pod's ENI, to the VPC's (egress-only) internet gateway, whatever snat_enabled says. */
	if (kind == ROUTE_VPC || (kind == 0 && (!snat_enabled || p.family == FAMILY_IPV6 || vpc_only))) {
		__u32 eni_ifindex = pod->eni_ifindex;
		struct eni_value *eni = bpf_map_lookup_elem(&enis, &eni_ifindex);
		if (!eni) {
			count(VERDICT_FROM_POD_NO_ENI, p.len);
			return TC_ACT_UNSPEC;
		}
		enum detour d = detour_of(skb, &p, eni_ifindex, (struct ends){pod->flags, 0, generation}, from_pod_out_eni);
		if (d != DETOUR_NONE)
			return take_detour(d, from_pod_out_eni, p.len);
		if (decrement_ttl(skb, &p) < 0)
			return write_failed(p.len);
		return finish_redirect(redirect_neigh_eni(eni_ifindex, eni, p.family), VERDICT_FROM_POD_OUT_ENI, p.len);
	}

	/* The node itself, a host-only range, or (with SNAT, IPv4) anywhere outside the VPC: the host stack
	 * routes, DNATs Service IPs and masquerades. */
	count(VERDICT_FROM_POD_TO_HOST, p.len);
	return TC_ACT_UNSPEC;
}

/* Attach point: tc egress (tcx, or clsact + cls_bpf) of every managed ENI: packets the host stack routed
 * out of it. */
SEC("tc")
int eniw_to_vpc(struct __sk_buff *skb)
{
	struct packet p;

	if (parse_ip(skb, &p) != PARSE_OK) {
		count(VERDICT_TO_VPC_PASS, skb->len);
		return TC_ACT_UNSPEC;
	}
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &p.src);
	if (!pod || pod->eni_ifindex == skb->ifindex) {
		count(VERDICT_TO_VPC_PASS, p.len);
		return TC_ACT_UNSPEC;
	}
	__u32 eni_ifindex = pod->eni_ifindex;
	struct eni_value *eni = bpf_map_lookup_elem(&enis, &eni_ifindex);
	if (!eni) {
		count(VERDICT_TO_VPC_PASS, p.len);
		return TC_ACT_UNSPEC;
	}
	/* The VPC drops a packet whose source is not an address of the ENI it leaves by (source/destination
	 * check), so a pod's packet must leave by the pod's own ENI whatever route the host picked. The host
	 * has already routed it (TTL, MTU, conntrack): only the device is checked. */
	__u32 mtu = 0;
	if (bpf_check_mtu(skb, eni_ifindex, &mtu, 0, 0) < 0) {
		count(VERDICT_REDIRECT_FAILED, p.len);
		return TC_ACT_SHOT;
	}
	return finish_redirect(redirect_neigh_eni(eni_ifindex, eni, p.family), VERDICT_TO_VPC_REROUTED, p.len);
}

/* source_detour judges the source of a packet from the VPC before it may take the fast path into a pod, and
 * says, with the action in *act, when it may not (one routes lookup serves both checks):
 *   - a pod of this node never sends through the VPC to a pod of it (from_pod delivers it directly), so its
 *     address arriving from there is forged: dropped; unless either end takes the VPC's way (POD_PATH_VPC:
 *     from_pod sent it out of the sender's ENI, and EC2's source/destination check vouches for the source);
 *   - a source the routes map gives the host (the node's own addresses, host-only ranges) goes to the host,
 *     which drops its own addresses as martians, as a router does;
 *   - with SNAT, a source outside the VPC's routes (on-premises, a peered VPC, a client an NLB kept) goes to
 *     the host: the pod's reply goes there by its destination (from_pod) to be masqueraded, so the request
 *     must cross the host as well, or conntrack meets the flow at its reply (a SYN-ACK is INVALID, a UDP
 *     reply is translated). IPv6 is never translated, so this one is IPv4's alone, nor a VPC-only pod's
 *     flows (POD_PATH_VPC), which from_pod sends out of its ENI untranslated. */
static __always_inline int source_detour(struct packet *p, struct pod_value *dst, int *act)
{
	struct pod_value *src = bpf_map_lookup_elem(&pods, &p->src);
	if (src && !((src->path | dst->path) & POD_PATH_VPC)) {
		count(VERDICT_TO_POD_SPOOF, p->len);
		*act = TC_ACT_SHOT;
		return 1;
	}
	struct route_key rk = {.prefixlen = 128, .dst = p->src};
	struct route_value *route = bpf_map_lookup_elem(&routes, &rk);
	enum route_kind kind = route ? route->kind : 0;
	if (kind == ROUTE_HOST) {
		count(VERDICT_TO_POD_HOST_SOURCE, p->len);
		*act = TC_ACT_UNSPEC;
		return 1;
	}
	if (snat_enabled && p->family == FAMILY_IPV4 && kind != ROUTE_VPC && !(dst->path & POD_PATH_VPC)) {
		count(VERDICT_TO_POD_OUTSIDE_VPC, p->len);
		*act = TC_ACT_UNSPEC;
		return 1;
	}
	return 0;
}

/* Attach point: tc ingress (tcx, or clsact + cls_bpf) of every managed ENI: packets from the VPC. */
SEC("tc")
int eniw_to_pod(struct __sk_buff *skb)
{
	struct packet p;

	if (parse_ip(skb, &p) != PARSE_OK) {
		count(VERDICT_TO_POD_PASS, skb->len);
		return TC_ACT_UNSPEC;
	}
	__u32 generation = policy_generation_now();
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &p.dst);
	/* Neighbour discovery is the link's, not a pod's, whatever its destination: the host answers it. */
	if (!pod || !pod->host_ifindex || p.nd) {
		count(VERDICT_TO_POD_PASS, p.len);
		return TC_ACT_UNSPEC;
	}
	int act;
	if (source_detour(&p, pod, &act))
		return act;
	/* A reply to a flow the host translated (Service DNAT to a VPC host), or a packet of one it delivers
	 * (NodePort, hostPort), detours: the host un-NATs it and keeps conntrack whole. */
	return into_pod(skb, &p, &p.dst, pod->host_ifindex, (struct ends){0, pod->flags, generation}, to_pod_to_peer);
}

/* The kernel's context of a netfilter program (include/net/netfilter/nf_bpf_link.h), and the fields of its
 * struct sk_buff read here, located by CO-RE. */
struct nf_hook_state;
struct sk_buff;
struct bpf_nf_ctx {
	const struct nf_hook_state *state;
	struct sk_buff *skb;
};

struct sk_buff___eniwire {
	unsigned int len;
	unsigned long _nfct; /* the conntrack entry, its ctinfo in the low 3 bits */
} __attribute__((preserve_access_index));

extern int bpf_dynptr_from_skb(struct __sk_buff *skb, __u64 flags, struct bpf_dynptr *ptr__uninit) __ksym;
extern void *bpf_dynptr_slice(const struct bpf_dynptr *ptr, __u32 offset, void *buffer__opt, __u32 buffer__szk) __ksym;

#define NF_DROP 0
#define NF_ACCEPT 1

/* enum ip_conntrack_info: the packet's relation to its conntrack entry. */
#define IP_CT_RELATED 1
#define IP_CT_NEW 2
#define IP_CT_IS_REPLY 3
#define IP_CT_RELATED_REPLY 4
#define IP_CT_UNTRACKED 7
#define NFCT_INFOMASK 7UL

/* forward_addrs reads a forwarded packet's addresses (IPv4-mapped for IPv4), its protocol, the offset of
 * its L4 header, and whether it is a later fragment. It returns -1 for what is not IPv4 or IPv6. An IPv6
 * packet's L4 header is taken to follow its fixed header: conntrack, which runs before this hook, has
 * reassembled fragments, and any other extension header leaves the protocol unknown, judged without ports. */
static __always_inline int forward_addrs(struct bpf_dynptr *ptr, struct ip_addr *src, struct ip_addr *dst, __u8 *protocol,
					 __u32 *l4_off, int *later_fragment)
{
	struct ipv6_head ip6_buf;
	struct ipv6_head *ip6 = bpf_dynptr_slice(ptr, 0, &ip6_buf, sizeof(struct iphdr));
	if (!ip6)
		return -1;
	struct iphdr *ip = (struct iphdr *)ip6;
	if (ip->version == 4 && ip->ihl >= 5) {
		ip_addr_from_v4(src, ip->saddr);
		ip_addr_from_v4(dst, ip->daddr);
		*protocol = ip->protocol;
		*l4_off = ip->ihl * 4;
		*later_fragment = (ip->frag_off & bpf_htons(IP_OFFSET)) != 0;
		return 0;
	}
	if (ip->version != 6)
		return -1;
	ip6 = bpf_dynptr_slice(ptr, 0, &ip6_buf, sizeof(ip6_buf));
	if (!ip6)
		return -1;
	__builtin_memcpy(src->addr, ip6->saddr, 16);
	__builtin_memcpy(dst->addr, ip6->daddr, 16);
	*protocol = ip6->nexthdr;
	*l4_off = IPV6_HLEN;
	*later_fragment = 0;
	return 0;
}

/* Attach point: netfilter, IPv4 and IPv6 FORWARD (a BPF netfilter link each): every packet the host stack forwards,
 * after conntrack and kube-proxy's DNAT (PREROUTING) and before SNAT (POSTROUTING), so on the addresses
 * and ports the flow really has: a Service's backend and targetPort, a NodePort's pod, a pod's internet
 * peer before masquerading. The fast paths never come here. Every packet of a flow with an isolated pod
 * at either end is judged on the flow's opening (conntrack says which way the packet goes), so a removed
 * allow cuts a host-carried flow as it cuts a fast-path one; ICMP errors conntrack relates to a flow
 * pass with it. What the node itself sends or receives (kubelet's probes) never crosses FORWARD. */
SEC("netfilter")
int eniw_forward(struct bpf_nf_ctx *ctx)
{
	struct sk_buff___eniwire *skb = (struct sk_buff___eniwire *)ctx->skb;
	struct bpf_dynptr ptr;
	__u32 len = skb->len;

	if (bpf_dynptr_from_skb((struct __sk_buff *)ctx->skb, 0, &ptr))
		return NF_ACCEPT;
	struct ip_addr saddr, daddr;
	__u8 protocol = 0;
	__u32 l4_off = 0;
	int later_fragment = 0;
	if (forward_addrs(&ptr, &saddr, &daddr, &protocol, &l4_off, &later_fragment) < 0)
		return NF_ACCEPT;

	struct pod_value *src = bpf_map_lookup_elem(&pods, &saddr);
	struct pod_value *dst = bpf_map_lookup_elem(&pods, &daddr);
	__u32 src_flags = src ? src->flags : 0, dst_flags = dst ? dst->flags : 0;
	if (!((src_flags | dst_flags) & ISOLATED))
		return NF_ACCEPT;

	unsigned long nfct = skb->_nfct;
	__u32 ctinfo = nfct & NFCT_INFOMASK;
	int tracked = nfct != 0 && ctinfo != IP_CT_UNTRACKED;
	if (tracked && (ctinfo == IP_CT_RELATED || ctinfo == IP_CT_RELATED_REPLY))
		return NF_ACCEPT;
	int reply = tracked && ctinfo >= IP_CT_IS_REPLY;

	__be16 ports[2] = {}, ports_buf[2];
	if (!later_fragment && (protocol == IPPROTO_TCP || protocol == IPPROTO_UDP || protocol == IPPROTO_SCTP)) {
		__be16 *pp = bpf_dynptr_slice(&ptr, l4_off, ports_buf, sizeof(ports_buf));
		if (pp) {
			ports[0] = pp[0];
			ports[1] = pp[1];
		}
	}
	struct opening o = {.protocol = protocol};
	o.opener = reply ? daddr : saddr;
	o.responder = reply ? saddr : daddr;
	o.opener_flags = reply ? dst_flags : src_flags;
	o.responder_flags = reply ? src_flags : dst_flags;
	o.port = reply ? ports[0] : ports[1];
	int opening = !tracked || ctinfo == IP_CT_NEW;
	enum policy_result r = judge(&o);
	if (r != POLICY_ALLOWED) {
		enum verdict v = r == POLICY_EGRESS_DENIED ? VERDICT_FORWARD_EGRESS_DENIED : VERDICT_FORWARD_INGRESS_DENIED;
		count(v, len);
		if (opening)
			report_denial(&o, r, v);
		return NF_DROP;
	}
	if (opening) {
		if (o.opener_flags & POLICY_EGRESS_ISOLATED)
			count(VERDICT_FORWARD_EGRESS_ALLOWED, len);
		if (o.responder_flags & POLICY_INGRESS_ISOLATED)
			count(VERDICT_FORWARD_INGRESS_ALLOWED, len);
	}
	return NF_ACCEPT;
}

char __license[] SEC("license") = "GPL";
