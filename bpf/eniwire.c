//go:build ignore
/* SPDX-License-Identifier: GPL-2.0 */
/* eniwire's tc programs: from_pod on each pod's host veth (ingress), to_vpc on every managed ENI (egress),
 * to_pod on every managed ENI (ingress). Every decision is a hash or LPM lookup, so the cost per packet does
 * not grow with the number of pods. */

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "maps.h"
#include "packet.h"

#ifndef AF_INET
#define AF_INET 2
#endif

/* Set by the loader before load (datapath.Config.SNAT). When off, every destination that is neither a pod
 * of this node nor a host route leaves by the pod's ENI, as with AWS_VPC_K8S_CNI_EXTERNALSNAT. */
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

/* redirect_neigh_eni sends the packet out of an ENI towards that ENI's subnet gateway, letting the
 * neighbour subsystem fill in the MACs. */
static __always_inline int redirect_neigh_eni(__u32 eni_ifindex, struct eni_value *eni)
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

/* remember_host_flow records that the host stack carries this flow, so to_pod lets its replies through
 * the host, where conntrack reverses any NAT. */
static __always_inline void remember_host_flow(struct ip_addr *pod, struct packet *p)
{
	struct flow_key k = {};
	k.pod = *pod;
	k.pod_port = p->sport;
	k.protocol = p->protocol;
	__u64 now = bpf_ktime_get_ns();
	__u64 *seen = bpf_map_lookup_elem(&host_flows, &k);
	if (seen) {
		/* A plain store: an update per packet would take the LRU's lock on every packet. */
		*seen = now;
		return;
	}
	bpf_map_update_elem(&host_flows, &k, &now, BPF_ANY);
}

SEC("tc")
int from_pod(struct __sk_buff *skb)
{
	struct packet p;

	switch (parse_ipv4(skb, &p)) {
	case PARSE_OK:
		break;
	case PARSE_NOT_IPV4:
		count(VERDICT_FROM_POD_NON_IPV4, skb->len);
		return TC_ACT_OK;
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
	if (peer && peer->host_ifindex) {
		long rc = bpf_redirect_peer(peer->host_ifindex, 0);
		if (rc == TC_ACT_REDIRECT)
			count_pod(&dst, p.len, 1);
		return finish_redirect(rc, VERDICT_FROM_POD_TO_PEER, p.len);
	}

	struct route_key rk = {.prefixlen = 128, .dst = dst};
	struct route_value *route = bpf_map_lookup_elem(&routes, &rk);
	enum route_kind kind = route ? route->kind : 0;
	if (kind == ROUTE_VPC || (kind == 0 && !snat_enabled)) {
		__u32 eni_ifindex = pod->eni_ifindex;
		struct eni_value *eni = bpf_map_lookup_elem(&enis, &eni_ifindex);
		if (!eni) {
			count(VERDICT_FROM_POD_NO_ENI, p.len);
			return TC_ACT_OK;
		}
		return finish_redirect(redirect_neigh_eni(eni_ifindex, eni), VERDICT_FROM_POD_OUT_ENI, p.len);
	}

	/* The node itself, a host-only range, or (with SNAT) anywhere outside the VPC: the host stack
	 * routes, DNATs Service IPs and masquerades. */
	remember_host_flow(&src, &p);
	count(VERDICT_FROM_POD_TO_HOST, p.len);
	return TC_ACT_OK;
}

SEC("tc")
int to_vpc(struct __sk_buff *skb)
{
	struct packet p;

	if (parse_ipv4(skb, &p) != PARSE_OK) {
		count(VERDICT_TO_VPC_PASS, skb->len);
		return TC_ACT_OK;
	}
	struct ip_addr src;
	ip_addr_from_v4(&src, p.saddr);
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &src);
	if (!pod || pod->eni_ifindex == skb->ifindex) {
		count(VERDICT_TO_VPC_PASS, p.len);
		return TC_ACT_OK;
	}
	__u32 eni_ifindex = pod->eni_ifindex;
	struct eni_value *eni = bpf_map_lookup_elem(&enis, &eni_ifindex);
	if (!eni) {
		count(VERDICT_TO_VPC_PASS, p.len);
		return TC_ACT_OK;
	}
	/* The VPC drops a packet whose source is not an address of the ENI it leaves by (source/destination
	 * check), so a pod's packet must leave by the pod's own ENI whatever route the host picked. */
	return finish_redirect(redirect_neigh_eni(eni_ifindex, eni), VERDICT_TO_VPC_REROUTED, p.len);
}

SEC("tc")
int to_pod(struct __sk_buff *skb)
{
	struct packet p;

	if (parse_ipv4(skb, &p) != PARSE_OK) {
		count(VERDICT_TO_POD_PASS, skb->len);
		return TC_ACT_OK;
	}
	struct ip_addr dst;
	ip_addr_from_v4(&dst, p.daddr);
	struct pod_value *pod = bpf_map_lookup_elem(&pods, &dst);
	if (!pod || !pod->host_ifindex) {
		count(VERDICT_TO_POD_PASS, p.len);
		return TC_ACT_OK;
	}

	struct flow_key k = {};
	k.pod = dst;
	k.pod_port = p.dport;
	k.protocol = p.protocol;
	if (bpf_map_lookup_elem(&host_flows, &k)) {
		count(VERDICT_TO_POD_NAT_REPLY, p.len);
		return TC_ACT_OK;
	}

	long rc = bpf_redirect_peer(pod->host_ifindex, 0);
	if (rc == TC_ACT_REDIRECT)
		count_pod(&dst, p.len, 1);
	return finish_redirect(rc, VERDICT_TO_POD_TO_PEER, p.len);
}

char __license[] SEC("license") = "GPL";
