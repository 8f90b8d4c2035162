/* SPDX-License-Identifier: GPL-2.0 */
/* The maps shared by eniwire's tc programs and its Go loader (datapath/).
 *
 * Every address is 16 bytes: IPv4 is stored IPv4-mapped (::ffff:a.b.c.d), which is what Go's
 * netip.Addr.As16 yields, so IPv6 addresses share the maps with IPv4 ones (datapath/doc.go, IPv6). Every struct
 * here that Go reads is listed with -type in gen.go; changing one is a map migration (see datapath/load.go). */
#pragma once

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define ENIWIRE_MAX_PODS 65536
#define ENIWIRE_MAX_ENIS 256
#define ENIWIRE_MAX_ROUTES 1024
#define ENIWIRE_MAX_POLICY_PEERS 131072
#define ENIWIRE_MAX_POLICY_PORTS 131072
/* policy ids: one per pod at most, and one more while a change writes a new id before the old is gone */
#define ENIWIRE_MAX_POLICY_IDS (ENIWIRE_MAX_PODS + 1)

/* An address, IPv4-mapped for IPv4. */
struct ip_addr {
	__u8 addr[16];
};

/* pods: pod IP -> where the pod is. */
struct pod_value {
	__u32 host_ifindex; /* host end of the pod's veth */
	__u32 eni_ifindex;  /* the ENI whose address the pod holds; 0: an IPv6 pod's IPv4 egress address */
	__u32 flags;        /* NetworkPolicy: the pod's policy id and isolation bits (POLICY_*); 0 when no policy selects it */
	__u32 path;         /* how the pod's packets travel (POD_PATH_*); 0: as every pod's */
};

/* POD_PATH_VPC: a pod of a security-group set in strict mode (POD_SECURITY_GROUP_ENFORCING_MODE=strict).
 * Every packet it sends, or another pod of the node sends it, leaves by the sender's ENI and comes back
 * through the VPC, whose security groups then judge it: no same-node shortcut, and no SNAT (a destination
 * outside the VPC is reached by the pod's own ENI, through a NAT gateway). The node's own packets to it
 * (kubelet's probes) and its answers to them stay on the node. */
#define POD_PATH_VPC 1

/* enis: ENI ifindex -> how to leave through it. */
struct eni_value {
	struct ip_addr gateway; /* next hop for bpf_redirect_neigh: the subnet's router (.1) */
	struct ip_addr subnet;  /* the ENI's subnet, for operators */
	__u8 subnet_prefixlen;  /* in IPv4-mapped bits (96 + IPv4 length) */
	__u8 family;            /* AF_INET or AF_INET6 of the gateway */
	__u8 mac[6];            /* the ENI's MAC, for operators */
};

/* routes: destination prefix -> what from_pod does with it (LPM trie). */
struct route_key {
	__u32 prefixlen; /* IPv4-mapped bits: 96 + IPv4 length; IPv6: its own length */
	struct ip_addr dst;
};

enum route_kind {
	ROUTE_VPC = 1,  /* a VPC CIDR or an EXCLUDE_SNAT CIDR: leave by the pod's own ENI, untranslated */
	ROUTE_HOST = 2, /* the node's own addresses and host-only ranges (Service CIDR): host stack */
};

struct route_value {
	enum route_kind kind;
};

/* counters: per-CPU packets and bytes by verdict. Values are part of the API (Prometheus labels). */
enum verdict {
	VERDICT_FROM_POD_OUT_ENI = 0,    /* from_pod: out of the pod's ENI (redirect_neigh) */
	VERDICT_FROM_POD_TO_PEER = 1,    /* from_pod: to a pod on this node (redirect_peer) */
	VERDICT_FROM_POD_TO_HOST = 2,    /* from_pod: handed to the host stack by its destination */
	VERDICT_FROM_POD_SPOOF = 3,      /* from_pod: dropped, source is not the pod of this veth */
	VERDICT_FROM_POD_MALFORMED = 4,  /* from_pod: dropped, truncated or malformed IPv4 or IPv6 header */
	VERDICT_FROM_POD_NON_IPV4 = 5,   /* from_pod: ARP, IPv6 neighbour solicitations and advertisements: passed */
	VERDICT_FROM_POD_NO_ENI = 6,     /* from_pod: the pod's ENI has no entry, passed to the host */
	VERDICT_TO_VPC_REROUTED = 7,     /* to_vpc: a pod of another ENI, moved to its own ENI */
	VERDICT_TO_VPC_PASS = 8,         /* to_vpc: left as routed (not IP, not a pod's, or already on its ENI) */
	VERDICT_TO_POD_TO_PEER = 9,      /* to_pod: into the pod (redirect_peer) */
	VERDICT_TO_POD_HOST_FLOW = 10,   /* to_pod: a packet of a flow the host carries (conntrack), to the host */
	VERDICT_TO_POD_PASS = 11,        /* to_pod: not IP (or no valid header), IPv6 neighbour discovery, or not for a pod: to the host */
	VERDICT_REDIRECT_FAILED = 12,    /* the redirect target is gone or the helper refused; dropped */
	VERDICT_FROM_POD_HOST_FLOW = 13, /* from_pod: a packet of a flow the host carries, to the host */
	VERDICT_FROM_POD_TTL = 14,       /* from_pod: TTL would expire, to the host (ICMP time exceeded) */
	VERDICT_FROM_POD_TOO_BIG = 15,   /* from_pod: larger than the next hop's MTU, to the host (ICMP or fragments) */
	VERDICT_FROM_POD_IPV6 = 16,      /* from_pod: IPv6 router messages, or from a link-local source other than NS and NA, dropped */
	VERDICT_TO_POD_TTL = 17,         /* to_pod: TTL would expire, to the host (ICMP time exceeded) */
	VERDICT_TO_POD_TOO_BIG = 18,     /* to_pod: larger than the pod veth's MTU, to the host (ICMP or fragments) */
	VERDICT_TO_POD_OUTSIDE_VPC = 19, /* to_pod: with SNAT, a source outside the VPC's routes, to the host (conntrack) */
	VERDICT_FROM_POD_VLAN = 20,      /* from_pod: a frame with a VLAN tag, dropped (a pod sends untagged frames) */
	VERDICT_FROM_POD_ETHERTYPE = 21, /* from_pod: an EtherType other than IPv4, ARP and IPv6, dropped */
	VERDICT_TO_POD_SPOOF = 22,       /* to_pod: dropped, the source is a pod of this node (a spoof from the VPC) */
	VERDICT_TO_POD_HOST_SOURCE = 23, /* to_pod: the source is the node's own or a host-only range, to the host */
	VERDICT_FROM_POD_IP_HEADER = 24, /* from_pod: IPv4 options or a bad header checksum, to the host (a router's call) */
	VERDICT_TO_POD_IP_HEADER = 25,   /* to_pod: IPv4 options or a bad header checksum, to the host (a router's call) */
	VERDICT_WRITE_FAILED = 26,       /* the fast path could not write the TTL (no memory to copy the packet); dropped */
	/* NetworkPolicy (policy.h). A denied packet is counted under its denial alone; an allowed one under the
	 * verdict of where it went, and, when it opens a flow that a policy isolates, under the direction
	 * whose policy allowed it as well: the *_ALLOWED counters count new flows beside their packets (and
	 * every allowed packet of what has no flow state from tc: ICMP, SCTP, other protocols). */
	VERDICT_FROM_POD_EGRESS_DENIED = 27,  /* from_pod: dropped, the sender's egress policy allows no such flow */
	VERDICT_FROM_POD_INGRESS_DENIED = 28, /* from_pod: dropped, the pod it is for (on this node) allows no such flow in */
	VERDICT_TO_POD_EGRESS_DENIED = 29,    /* to_pod: dropped, the pod's egress policy no longer allows the flow it opened */
	VERDICT_TO_POD_INGRESS_DENIED = 30,   /* to_pod: dropped, the pod's ingress policy allows no such flow */
	VERDICT_FROM_POD_EGRESS_ALLOWED = 31, /* from_pod: a new flow the sender's egress policy allows */
	VERDICT_FROM_POD_INGRESS_ALLOWED = 32, /* from_pod: a new flow the pod it is for (on this node) allows in */
	VERDICT_TO_POD_EGRESS_ALLOWED = 33,   /* to_pod: a packet without flow state the pod's egress policy allows (its reply) */
	VERDICT_TO_POD_INGRESS_ALLOWED = 34,  /* to_pod: a new flow the pod's ingress policy allows */
	VERDICT_FORWARD_EGRESS_DENIED = 35,  /* forward: dropped, a flow the host carries that the opener's egress policy denies */
	VERDICT_FORWARD_INGRESS_DENIED = 36, /* forward: dropped, a flow the host carries that the responder's ingress policy denies */
	VERDICT_FORWARD_EGRESS_ALLOWED = 37, /* forward: a new flow the host carries that the opener's egress policy allows */
	VERDICT_FORWARD_INGRESS_ALLOWED = 38, /* forward: a new flow the host carries that the responder's ingress policy allows */
	/* IPv6 (every verdict above but the IPv4 header's and forward's counts IPv6 packets as well). */
	VERDICT_FROM_POD_IPV6_HEADER = 39, /* from_pod: an IPv6 hop-by-hop options header, to the host (a router reads it) */
	VERDICT_TO_POD_IPV6_HEADER = 40,   /* to_pod: an IPv6 hop-by-hop options header, to the host (a router reads it) */
	/* Conntrack full (policy.h, ct_insert): the opening packet of an isolated pod's fast-path flow dropped,
	 * since no entry could record the flow; the flow opens in neither direction, never half. */
	VERDICT_FROM_POD_CT_FULL = 41, /* from_pod: a new flow of an isolated pod, dropped: conntrack had no room */
	VERDICT_TO_POD_CT_FULL = 42,   /* to_pod: a new flow of an isolated pod, dropped: conntrack had no room */
	VERDICT_MAX = 43,
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

/* pod_stats: per-CPU traffic of each pod, by its IP. The loader sizes it to the node's max pods
 * (datapath.Config.MaxPods); entries are allocated as pods first send or receive, not up front. */
struct pod_traffic {
	__u64 tx_packets; /* sent by the pod from its own address (from_pod, past the source check) */
	__u64 tx_bytes;
	__u64 rx_packets; /* redirected towards the pod by a fast path (redirect_peer), not what the host delivers */
	__u64 rx_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ENIWIRE_MAX_PODS);
	__type(key, struct ip_addr);
	__type(value, struct pod_value);
} pods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ENIWIRE_MAX_ENIS);
	__type(key, __u32);
	__type(value, struct eni_value);
} enis SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, ENIWIRE_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct route_key);
	__type(value, struct route_value);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VERDICT_MAX);
	__type(key, enum verdict); /* so bpftool prints verdict names */
	__type(value, struct counter);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, ENIWIRE_MAX_PODS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct ip_addr);
	__type(value, struct pod_traffic);
} pod_stats SEC(".maps");

/* NetworkPolicy state. A judgment costs three lookups per isolated side, whatever the number of pods,
 * policies, rules and CIDRs (an established flow is judged again only after a policy changed:
 * policy_generation): the pod's own entry (pods, already read) gives its policy id and isolation; the id
 * names a peer set per direction (policy_peer_sets); the peer's address takes the longest prefix of that
 * set and direction in policy_peers, which names a port set; the protocol and port take the longest prefix
 * of the policy's port set in policy_ports. No cap on combinations: a peer names one port set, and a port
 * set holds any number of ranges, each split into at most 30 prefixes.
 *
 * A peer set is one direction's peers with the port set each names, stored once for every policy whose
 * peers in that direction are the same (workloads allowing the same 5,000 pods on different ports share
 * one copy): port sets are numbered in the order of the set's sorted peers, ingress from 1, egress from
 * POLICY_EGRESS_PORT_SETS, so equal peers name equal numbers whatever the ports.
 *
 * A pod's flags: bits 0-29 its policy id, bit 30 egress isolated, bit 31 ingress isolated. Entries are
 * written under a new id before the pod's flags flip to it (one update of its pods entry, which packets
 * see whole), and the old id's entries are deleted after: no packet sees part of two policies. Pods with
 * the same compiled policy share an id. Isolation bits with an id that has no entries allow nothing: a
 * policy that did not fit the maps leaves the pod so (fail closed). */
#define POLICY_ID_MASK 0x3fffffff
#define POLICY_EGRESS_ISOLATED (1u << 30)
#define POLICY_INGRESS_ISOLATED (1u << 31)
#define POLICY_EGRESS_PORT_SETS (1u << 31)

enum policy_direction {
	POLICY_INGRESS = 0, /* peers that may open a flow to the pod */
	POLICY_EGRESS = 1,  /* peers the pod may open a flow to */
};

/* policy_peer_sets: policy id -> the peer set of each direction (0: none, which allows nothing). */
struct policy_peer_set_ids {
	__u32 ingress;
	__u32 egress;
};

/* policy_peers: {peer set, direction, peer prefix} -> port set (LPM trie). prefixlen counts the set and
 * direction (64 bits) and then the address's bits (IPv4-mapped: 96 + IPv4 length). The bytes are those of
 * the earlier layout whose first field was the policy id (datapath/policy.go recovers those entries as
 * peer sets of their own). */
struct policy_peer_key {
	__u32 prefixlen;
	__u32 peer_set;
	enum policy_direction direction;
	struct ip_addr peer;
};

struct policy_peer_value {
	__u32 port_set; /* 0: no port (the hole an ipBlock's except leaves) */
};

/* policy_ports: {policy id, port set, protocol, port} -> verdict (LPM trie). prefixlen 64 matches any
 * protocol and port (a rule without ports); 80 + n one protocol's ports sharing their first n bits. The
 * longest match decides: a denied range carves its ports out of a wider allowed one (ClusterNetworkPolicy). */
struct policy_port_key {
	__u32 prefixlen;
	__u32 policy_id;
	__u32 port_set;
	__u8 protocol;
	__u8 pad;
	__be16 port;
};

struct policy_port_value {
	__u32 allowed; /* 1 allowed, 0 denied; no entry: denied */
};

#define POLICY_PEER_KEY_BITS (64 + 128)
#define POLICY_PORT_KEY_BITS (64 + 32)

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, ENIWIRE_MAX_POLICY_PEERS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct policy_peer_key);
	__type(value, struct policy_peer_value);
} policy_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ENIWIRE_MAX_POLICY_IDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct policy_peer_set_ids);
} policy_peer_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, ENIWIRE_MAX_POLICY_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct policy_port_key);
	__type(value, struct policy_port_value);
} policy_ports SEC(".maps");

/* policy_generation: one counter the agent increments after every change of a pod's flags (a policy set,
 * changed or cleared, a pod entry written with flags). An established flow's conntrack entry holds the
 * generation it was last judged under (flow.h, ENIWIRE_CT_TAG): while it is current, no pod's policy changed
 * and the flow's verdict stands, so its packets skip the policy lookups; once it moved, the next packet is
 * judged again (a removed allow cuts the flow) and, allowed, takes the new generation. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} policy_generation SEC(".maps");

/* policy_denials: an event for each new flow a policy denied (policy.h, report_denial), for the agent to
 * log with the policies that isolate the pod. At most DENIALS_PER_SECOND per CPU: a flood of denied packets
 * costs a counter, not a log line each. */
struct policy_denial {
	struct ip_addr pod;  /* the pod whose policy denied the flow */
	struct ip_addr peer; /* the other end */
	__u32 flags;         /* the pod's flags: its policy id and isolation */
	enum verdict verdict;
	enum policy_direction direction; /* whose rules denied: the pod's egress or its ingress */
	__u16 port;                      /* the responder's port, host order */
	__u8 protocol;
	__u8 pad;
};

#define DENIALS_PER_SECOND 64

struct denial_budget {
	__u64 window_start_ns;
	__u32 sent;
	__u32 pad;
};

/* A ring buffer's records carry no BTF of their own: this puts struct policy_denial's in the object, for
 * bpf2go. */
const struct policy_denial *unused_policy_denial __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} policy_denials SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct denial_budget);
} denial_budgets SEC(".maps");
