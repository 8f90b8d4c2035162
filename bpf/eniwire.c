//go:build ignore
/* SPDX-License-Identifier: GPL-2.0 */
/* eniwire's tc programs: eniw_from_pod on each pod's host veth (ingress), eniw_to_vpc on every managed ENI
 * (egress), eniw_to_pod on every managed ENI (ingress). Every decision is a hash, LPM or conntrack lookup,
 * so the cost per packet does not grow with the number of pods.
 *
 * The fast paths (redirect_peer into a pod, redirect_neigh out of an ENI) behave as a router: a packet of a
 * flow the host carries goes to the host (flow.h), the TTL is decremented and a packet about to expire goes
 * to the host, which answers with ICMP time exceeded; a packet too big for the next hop goes to the host,
 * which fragments it or answers fragmentation needed.
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

#ifndef AF_INET
#define AF_INET 2
#endif

#define ETH_P_ARP_ 0x0806
#define ETH_P_IPV6_ 0x86DD
#define IPPROTO_ICMPV6_ 58
#define NDISC_ROUTER_SOLICITATION 133
#define NDISC_REDIRECT 137

/* Set by the loader before load (datapath.Config.SNAT). When off, every destination that is neither a pod
 * of this node nor a host route leaves by the pod's ENI, as with AWS_VPC_K8S_CNI_EXTERNALSNAT. When on, such
 * a destination goes to the host, and so does a packet from such a source (from_outside_vpc). */
volatile const __u8 snat_enabled = 1;

static __always_inline void count(enum verdict verdict, __u32 len)
{
	struct counter *c = bpf_map_lookup_elem(&counters, &verdict);
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

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
	DETOUR_HOST_FLOW, /* its flow is the host's */
	DETOUR_TTL,       /* it would expire at this hop */
	DETOUR_TOO_BIG,   /* it does not fit the next hop's MTU */
	DETOUR_NO_DEVICE, /* the interface it would be redirected to is gone */
};

/* detour_of says whether a packet may take the fast path to interface target_ifindex. Checking the device
 * here is what makes redirect_failed honest: the redirect helpers accept any ifindex and fail later. */
static __always_inline enum detour detour_of(struct __sk_buff *skb, struct packet *p, __u32 target_ifindex)
{
	if (host_carries(skb, p))
		return DETOUR_HOST_FLOW;
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
 * neighbour subsystem fill in the MACs. */
static __always_inline long redirect_neigh_eni(__u32 eni_ifindex, struct eni_value *eni)
{
	struct bpf_redir_neigh nh = {};
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

/* from_pod_non_ipv4: ARP and IPv6 neighbour discovery pass (the host answers ARP for the pod's gateway);
 * any other IPv6 is dropped while eniwire is IPv4-only, so a pod cannot reach the node or its neighbours
 * over link-local IPv6 behind the address checks. Other EtherTypes pass: the host has no use for them. */
static __always_inline int from_pod_non_ipv4(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) <= data_end && eth->h_proto == bpf_htons(ETH_P_IPV6_)) {
		__u8 next = 0, type = 0;
		/* The next-header field sits at byte 6 of the IPv6 header, the ICMPv6 type right after it. */
		if (bpf_skb_load_bytes(skb, ETH_HLEN_ + 6, &next, 1) < 0 || next != IPPROTO_ICMPV6_ ||
		    bpf_skb_load_bytes(skb, ETH_HLEN_ + 40, &type, 1) < 0 || type < NDISC_ROUTER_SOLICITATION ||
		    type > NDISC_REDIRECT) {
			count(VERDICT_FROM_POD_IPV6, skb->len);
			return TC_ACT_SHOT;
		}
	}
	count(VERDICT_FROM_POD_NON_IPV4, skb->len);
	return TC_ACT_UNSPEC;
}

/* The verdicts a program counts a fast-path packet under: delivered, or why it detoured to the host. */
struct fast_verdicts {
	enum verdict delivered, host_flow, ttl, too_big;
};

#define FROM_POD_DETOURS .host_flow = VERDICT_FROM_POD_HOST_FLOW, .ttl = VERDICT_FROM_POD_TTL, .too_big = VERDICT_FROM_POD_TOO_BIG
static const struct fast_verdicts from_pod_to_peer = {.delivered = VERDICT_FROM_POD_TO_PEER, FROM_POD_DETOURS};
static const struct fast_verdicts from_pod_out_eni = {.delivered = VERDICT_FROM_POD_OUT_ENI, FROM_POD_DETOURS};
static const struct fast_verdicts to_pod_to_peer = {
	.delivered = VERDICT_TO_POD_TO_PEER,
	.host_flow = VERDICT_TO_POD_HOST_FLOW,
	.ttl = VERDICT_TO_POD_TTL,
	.too_big = VERDICT_TO_POD_TOO_BIG,
};

/* take_detour counts a packet that may not take the fast path under its program's verdict for the reason,
 * and passes it to the host, or drops it when its target is gone. */
static __always_inline int take_detour(enum detour d, struct fast_verdicts v, __u32 len)
{
	switch (d) {
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
				    struct fast_verdicts v)
{
	enum detour d = detour_of(skb, p, host_ifindex);
	if (d != DETOUR_NONE)
		return take_detour(d, v, p->len);
	decrement_ttl(skb);
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

	switch (parse_ipv4(skb, &p)) {
	case PARSE_OK:
		break;
	case PARSE_NOT_IPV4:
		return from_pod_non_ipv4(skb);
	default:
		count(VERDICT_FROM_POD_MALFORMED, skb->len);
		return TC_ACT_SHOT;
	}

	struct ip_addr src, dst;
	ip_addr_from_v4(&src, p.saddr);
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &src);
	/* A known source is not enough: it must be the pod behind this veth, or any pod could send as another
	 * (and have its replies delivered there). At tc ingress skb->ifindex is the device the packet arrived
	 * on, the host end of the sender's veth. */
	if (!pod || pod->host_ifindex != skb->ifindex) {
		count(VERDICT_FROM_POD_SPOOF, p.len);
		return TC_ACT_SHOT;
	}
	count_pod(&src, p.len, 0);

	ip_addr_from_v4(&dst, p.daddr);
	struct pod_value *peer = bpf_map_lookup_elem(&pods, &dst);
	if (peer && peer->host_ifindex)
		return into_pod(skb, &p, &dst, peer->host_ifindex, from_pod_to_peer);

	struct route_key rk = {.prefixlen = 128, .dst = dst};
	struct route_value *route = bpf_map_lookup_elem(&routes, &rk);
	enum route_kind kind = route ? route->kind : 0;
	if (kind == ROUTE_VPC || (kind == 0 && !snat_enabled)) {
		__u32 eni_ifindex = pod->eni_ifindex;
		struct eni_value *eni = bpf_map_lookup_elem(&enis, &eni_ifindex);
		if (!eni) {
			count(VERDICT_FROM_POD_NO_ENI, p.len);
			return TC_ACT_UNSPEC;
		}
		enum detour d = detour_of(skb, &p, eni_ifindex);
		if (d != DETOUR_NONE)
			return take_detour(d, from_pod_out_eni, p.len);
		decrement_ttl(skb);
		return finish_redirect(redirect_neigh_eni(eni_ifindex, eni), VERDICT_FROM_POD_OUT_ENI, p.len);
	}

	/* The node itself, a host-only range, or (with SNAT) anywhere outside the VPC: the host stack
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

	if (parse_ipv4(skb, &p) != PARSE_OK) {
		count(VERDICT_TO_VPC_PASS, skb->len);
		return TC_ACT_UNSPEC;
	}
	struct ip_addr src;
	ip_addr_from_v4(&src, p.saddr);
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &src);
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
	return finish_redirect(redirect_neigh_eni(eni_ifindex, eni), VERDICT_TO_VPC_REROUTED, p.len);
}

/* from_outside_vpc says whether a packet arriving from the VPC comes from a source outside the VPC's routes
 * (on-premises, a peered VPC, a client an NLB kept) while the node translates: the pod's reply goes to the
 * host by its destination (from_pod) to be masqueraded, so the request must cross the host as well, or
 * conntrack meets the flow at its reply (a SYN-ACK is INVALID, a UDP reply is translated). */
static __always_inline int from_outside_vpc(struct packet *p)
{
	if (!snat_enabled)
		return 0;
	struct route_key rk = {.prefixlen = 128};
	ip_addr_from_v4(&rk.dst, p->saddr);
	struct route_value *route = bpf_map_lookup_elem(&routes, &rk);
	return !route || route->kind != ROUTE_VPC;
}

/* Attach point: tc ingress (tcx, or clsact + cls_bpf) of every managed ENI: packets from the VPC. */
SEC("tc")
int eniw_to_pod(struct __sk_buff *skb)
{
	struct packet p;

	if (parse_ipv4(skb, &p) != PARSE_OK) {
		count(VERDICT_TO_POD_PASS, skb->len);
		return TC_ACT_UNSPEC;
	}
	struct ip_addr dst;
	ip_addr_from_v4(&dst, p.daddr);
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &dst);
	if (!pod || !pod->host_ifindex) {
		count(VERDICT_TO_POD_PASS, p.len);
		return TC_ACT_UNSPEC;
	}
	if (from_outside_vpc(&p)) {
		count(VERDICT_TO_POD_OUTSIDE_VPC, p.len);
		return TC_ACT_UNSPEC;
	}
	/* A reply to a flow the host translated (Service DNAT to a VPC host), or a packet of one it delivers
	 * (NodePort, hostPort), detours: the host un-NATs it and keeps conntrack whole. */
	return into_pod(skb, &p, &dst, pod->host_ifindex, to_pod_to_peer);
}

char __license[] SEC("license") = "GPL";
