// Package datapath loads eniwire's tc programs, pins their maps and links under a bpffs directory, attaches
// them to pod veths and ENIs (tcx, or clsact + cls_bpf where tcx is missing), and offers a typed API over
// the maps. One Datapath owns every loaded object; a restarted agent reopens the same pins, so packets keep
// flowing while it starts.
//
// # Layers
//
// The datapath is a stack of packages. The contract is a leaf that any of them may import; otherwise each
// imports only those below it, and none imports the controller, which reaches the datapath through the
// contract alone:
//
//	datapath/dptypes    the contract: the Driver interface the controller calls (ENIUp, PodUp, ...) and the
//	                    ENI and Pod it passes, addresses typed (netip.Addr, netip.Prefix, net.HardwareAddr)
//	                    and parsed once by the controller. A leaf: it imports nothing of eniwire.
//	datapath/nodenet    the node: the agent's bpf Driver. It prepares the node (ip_forward, each ENI's link,
//	                    MTU, /32 address and rp_filter, the node's addresses followed into the routes map) and
//	                    drives the layers below for the controller.
//	datapath/hostroute  a pod's /32 host route and the reaper of released host veths; alone, the agent's
//	                    hostroute Driver.
//	datapath/snat       the one masquerade rule (nftables or iptables).
//	datapath            this package, the loader: the tc programs, their maps and links pinned under the
//	                    bpffs, attach (tcx, clsact fallback), and the typed map API (Pod, ENI, Route, counters,
//	                    and the pods' NetworkPolicy: the contract's PolicyDriver).
//	bpf                 the C programs and the objects bpf2go generates from them.
//
// Beside them, internal/netlinkdump takes every netlink dump of the datapath and of the CNI plugin again
// when a concurrent change interrupted it, and datapath/internal/linktest is what the namespace tests do to
// links of their own.
//
// # One flow, one path
//
// A flow (5-tuple, both directions) is either wholly on the BPF fast path or wholly through the host
// stack: the host must never see one direction only, or conntrack marks the next packet INVALID (and
// kube-proxy drops INVALID packets) and a reply skips its un-NAT. The host carries a flow when it
// translated or delivered it: Service DNAT (whatever the backend), NodePort, hostPort, SNAT, and anything
// to or from the node's own addresses. With SNAT on, a pod's packet to a destination outside the VPC's
// routes goes to the host by its destination, so a packet from such a source goes to the host as well
// (to_pod): a connection opened from outside the VPC (on-premises, a peered VPC) is then the host's both
// ways. The EXCLUDE_SNAT CIDRs are VPC routes for this, as for the way out.
//
// The programs ask the kernel's own conntrack, read from tc with the bpf_skb_ct_lookup kfunc, instead of
// keeping a flow table of their own. A flow has a conntrack entry exactly when the host has seen a packet
// of it, because conntrack runs in the host stack's netfilter hooks and redirected packets skip them. So
// before a packet takes a fast path (a pod's packet to a pod of this node or out of its ENI, a VPC packet
// into a pod), its flow is looked up; when conntrack knows it, the packet goes to the host like the rest
// of the flow. ICMP errors are looked up by the flow they quote (the quoted tuple reversed, as conntrack
// relates them); ICMP echo, which kube-proxy never translates, follows its route; fragments and other
// protocols always go to the host, in both directions (bpf/flow.h).
//
// Why conntrack and not a table of our own:
//   - It is the truth the issue is about. An own table would be filled by guessing which packets the host
//     translates (tc egress of the host veth, from_pod's hand-offs) and expired by timers meant to match
//     conntrack's; whenever the two disagree, a flow is split again. The kernel's entry is created by the
//     translation itself and dies with it.
//   - Bounded memory, and no pod can evict another's state: eniwire keeps no per-flow state at all. The
//     entries are the host's own, bounded by nf_conntrack_max as on any kube-proxy node, and flows on the
//     fast path never enter that table.
//   - Entries go with the pod: DeletePod removes the conntrack entries of the pod's address, so an address
//     handed to a new pod inherits no flow.
//   - An agent restart or upgrade loses no live flow: the state lives in the kernel, not in the agent or
//     in a pinned map whose layout an upgrade could change.
//
// Kernels: the conntrack kfuncs exist from Linux 5.18 (lookup from tc and XDP), and need nf_conntrack
// built in or loaded. Where they are missing, loading fails with an error saying so: there is no safe
// fallback, since without a look at conntrack the fast paths would split translated flows again. tcx needs
// 6.6 (clsact is used below), bpf_check_mtu 5.12, bpf_redirect_peer and bpf_redirect_neigh 5.10.
//
// # NetworkPolicy
//
// The agent compiles the policies that select each pod of the node into a dptypes.PodPolicy (isolation per
// direction, peer prefixes each with port ranges) and hands it over with SetPodPolicy (policy.go); the
// programs judge a flow on its opening: the opener's egress policy and the responder's ingress policy,
// when they are pods of this node (bpf/policy.h).
//
// The maps, and why. The cost of a judgment must not grow with the number of pods, policies, rules or
// CIDRs, so it is a fixed number of lookups: the pod's own pods entry (read anyway) holds its policy id and
// isolation bits in its flags; the id names a peer set per direction (policy_peer_sets, a hash); the peer
// address takes the longest prefix of {peer set, direction, peer} in the policy_peers LPM trie, which
// names a port set; {policy id, set, protocol, port} takes the longest
// prefix in the policy_ports LPM trie, where a port range is split into at most 30 aligned prefixes (an
// endPort range costs entries, not lookups) and a rule without ports is one prefix that ignores protocol
// and port. So there is no cap on the ports of a peer (the AWS agent's 24 per CIDR), an ipBlock's except
// is a longer prefix whose set is empty, and state is keyed by the pod's address, never by a name. Pods
// whose compiled policies are equal share one id and one copy of the entries.
//
// Flat per packet: the verdict of an established flow is kept in its conntrack entry. An LPM look-up walks
// a trie whose depth grows with the logarithm of its entries (bounded by the key's 192 or 96 bits), so a
// judgment costs a little more as a node's policies grow: BenchmarkPolicy measured an established flow at
// 1.5 × the cost without policy with 100 rules and 1.8–2.1 × with 10,000 (CIDRs of /24 to /32 with port
// ranges of their own), the growth all in the two look-ups, since the flow was judged again on every
// packet. Hashes keyed by exact peers would flatten pod peers only (an ipBlock still needs a longest
// prefix, and a hash per prefix length costs a probe per length present); so instead a packet of an
// established flow is not judged at all while nothing it depends on changed. A verdict depends on the two
// ends' flags alone (their policy ids and isolation: the entries under an id never change once a pod uses
// it), so the agent increments one policy generation (the policy_generation map) after every change of a
// pod's flags as the programs see them (SetPodPolicy, ClearPodPolicy, PutPod of a pod with a policy, an
// agent start), and an established flow's conntrack mark holds the generation it was judged under: equal,
// its packet costs the conntrack look-up it took anyway, one array read and a compare; different, it is
// judged again and, allowed, its mark takes the current generation. So a removed allow still cuts an
// established flow with its next packet, and every other flow pays one judgment per change. The programs
// read the generation before the pods' flags and the agent writes it after them, so a packet judged on
// flags older than a change cannot record the generation that followed it. The mark keeps 22 bits of the
// generation (its 24th says the flow is closing, its 23rd that an RST closed it): a flow would keep a stale
// verdict only if it stayed silent through a multiple of 4,194,304 changes of the node's pods' flags (and at
// most 6 hours, its idle timeout). A new flow is judged on the
// maps as before; its cost is dominated by the creation of its conntrack entry, and does not move between
// 100 and 10,000 rules. BenchmarkPolicy measures both with 0, 100 and 10,000 rules selecting the pod.
//
// Atomic changes. SetPodPolicy writes the new entries under a new id, flips the pod's flags to it (one
// update of its pods entry, which a packet sees whole), then deletes the old id's entries once no pod uses
// them: no packet sees half of two policies. A pod's flags survive PutPod, so a policy set before the pod's
// entry exists isolates it from its first packet. A policy that does not fit the maps (131,072 peer
// prefixes, 131,072 port prefixes) leaves the pod isolated both ways under id 0, which has no entries, and
// SetPodPolicy returns a *PolicyTooLargeError; nothing else changes (fail closed). A new agent reads the
// pods' flags and the entries back (recoverPolicies) and deletes the entries of ids no pod uses.
//
// Peer sets (peersets.go): a direction's peers, each naming a port set, written once for every policy whose
// peers in that direction are equal, its port sets numbered by the order of its sorted peers (egress from
// 1<<31), so the workloads of a namespace open to the same 5,000 client pods on ports of their own hold one
// copy of those pods between them (BenchmarkPolicyCapacity: 1,000 such policies in 5,000 peer entries,
// where a copy each stopped at 26). A peer set lives while a policy id names it. An agent from before peer
// sets keyed policy_peers by the policy id, in the same bytes: the map is kept and each of its policy ids
// in use becomes the peer set of its own number both ways, so an upgrade judges every pod as before.
//
// Flow state: the kernel's conntrack, still the one flow table. A flow on the fast path with an isolated
// pod at either end gets an entry of eniwire's in the kernel's conntrack on its first, allowed packet
// (bpf_skb_ct_alloc, bpf_ct_insert_entry), in the direction it opened, marked eniwire's (ENIWIRE_CT_TAG in
// the mark's top byte, the policy generation in its low 22 bits) and marked assured; when conntrack has no
// room for the entry, the packet is dropped and counted as dropped_conntrack_full, so the flow opens in
// neither direction rather than half (its reply would look like a stranger's); every later packet finds
// it with the lookup the programs already take and, once a policy changed, is judged again on the flow's
// opening (the entry says which way the packet goes), so a reply passes whatever the replying pod's own rules
// say, and a removed allow cuts an established flow with its next packet. Entries an earlier agent marked
// 0x0e1e0001 stay eniwire's, judged again on their next packet. An allowed packet renews the entry's timeout
// (6 hours for TCP, 120 seconds for UDP); once a FIN of a TCP flow has passed, the mark's ENIWIRE_CT_CLOSING
// bit is set and every later packet (the close's last ACK too) renews it for 2 minutes, the kernel's own
// fin_wait and time_wait, so a half-closed connection whose other side still answers lives on; once an RST
// has, for 10 seconds, the kernel's close timeout; until a SYN opens the tuple again. So a pod's short
// connections leave no entry for 6 hours each; the kernel expires it, no garbage collector of ours races
// live flows, and it survives an agent restart. An ICMP error about a flow with an entry is judged with that
// flow and renews nothing. An entry of the host's (no mark) still means the host carries the flow. Flows of
// pods no policy isolates keep no state, as before; so a flow a pod had before a policy isolated it has no
// entry (nor has one whose entry expired, or that conntrack's tools or kube-proxy deleted). A TCP packet of
// such a flow opens nothing (no SYN), and who opened the flow is not in it: the flow is taken to be opened
// by the end with the ephemeral port (Linux's 32768 and above) when just one end has one, else in the one
// direction the policies allow when just one is allowed, else by the end with the higher port; it is judged
// so, and allowed, given its entry in that direction. Taking the sender for the opener, as conntrack's loose
// pickup does, would record a client's flow as its server's whenever the server sends first, and a later
// ingress deny-all on the server would never cut it. The cost of the guess: a stranger's packet without SYN
// may be taken up as the isolated pod's own flow and delivered (the pod's kernel, holding no such
// connection, answers with an RST), but a SYN against an entry's direction is judged as the opening it is,
// so no connection opens that the policies refuse. ICMP of an isolated pod goes to the host: its conntrack
// ties an echo reply to its request and an error to the flow it quotes, and eniw_forward judges what
// belongs to no flow as an opening of its own, so a pod under egress deny-all sends no echo reply or error
// of any payload and a pod under ingress isolation receives none it did not ask for (an ICMP error about a
// fast-path flow, which the programs find by the flow it quotes, stays on the fast path with it). Packets
// conntrack cannot hold from tc are judged alone: SCTP as a request when it carries an INIT and either way
// otherwise (the host tracks SCTP; see the forward hook), other protocols as requests.
// A first fragment of TCP or UDP carries its ports and is judged on its flow's conntrack entry like any
// packet of the flow (a fragmented reply passes as a reply); a later fragment passes to the host, which
// reassembles it with its judged first fragment.
//
// Flows the host carries: the forward hook. A Service's flow, a NodePort's, a pod's flow to the internet
// and the fast path's detours (SCTP, fragments, IPv4 options, packets too big) cross the host stack's IPv4
// FORWARD. eniw_forward, a BPF netfilter program there (Config.NetworkPolicy; forward.go), sees them after
// conntrack and kube-proxy's DNAT (PREROUTING) and before SNAT (POSTROUTING): on the backend and its
// targetPort, on the pod's internet peer before masquerading, so no ClusterIP list is kept and a Service's
// port may differ from its targetPort. It judges every packet with an isolated pod at either end on the
// flow's opening, taking the direction from the packet's conntrack entry (skb->_nfct), and lets ICMP errors
// conntrack relates to a flow pass. What the node sends to its pods or receives from them (kubelet's
// probes, a hostNetwork pod) never crosses FORWARD and is always allowed; so is, today, a pod's traffic to
// the node's own addresses (INPUT is not judged).
//
// What is counted and reported: a denied packet under its program's dropped_policy_{egress,ingress}
// verdict, a new flow a policy allowed under policy_{egress,ingress}_allowed beside its packet's verdict,
// and each denied new flow as an event in the policy_denials ring buffer (ReadPolicyDenials: the pod, the
// peer, the port, the pod's policy id and whose rules denied it), at most 64 a second per CPU so that a
// flood costs counters, not events.
//
// # What crosses a pod's veth
//
// from_pod takes from a pod untagged IPv4 and IPv6 from the pod's own addresses (the pod behind that very
// veth), ARP (the host resolves pods on their veths) and IPv6 neighbour solicitations and advertisements;
// it drops the rest, counted: another source (dropped_spoof), a VLAN tag (dropped_vlan: the kernel strips a
// tag of VLAN 0 after tc runs, so a tagged frame would reach the IP stack unchecked), other IPv6 from a
// link-local or unspecified source, and router advertisements, solicitations and redirects from any
// (dropped_ipv6), other EtherTypes (dropped_ethertype). Host veths
// also take no IPv6 router advertisement or redirect (the plugin sets accept_ra and accept_redirects to 0).
// It stays on a pod's veth until the veth goes: a pod torn down has no entry, so whatever it still sends
// is dropped. to_pod drops a packet from the VPC claiming a pod of this node (dropped_spoof), and hands
// one claiming the node's own address or a host-only range to the host, which drops its own addresses as
// martians (to_host_source).
//
// # IPv6
//
// The programs handle IPv6 as IPv4, in the same code: a packet is parsed into one struct packet whose
// addresses are 16 bytes, the maps' form (IPv4-mapped for IPv4), so the pods, routes, enis and policy
// lookups, the verdicts and the policy judgement are the same for both families; only what the header
// itself says differs (bpf/packet.h, bpf/flow.h):
//   - A pod's IPv6 address (from the node's /80) is a pods entry of its own beside its IPv4 one, on the same
//     veth; from_pod's source check is the same lookup. A link-local or unspecified source is no pod's:
//     what a pod sends from one is dropped (dropped_ipv6), except neighbour solicitations and advertisements,
//     which pass whatever the source (the pod resolves nothing but its gateway, the host resolves the pod).
//     Router solicitations, advertisements and redirects are dropped from any source. A pod with no IPv6
//     entry so keeps exactly what IPv4-only eniwire gave it.
//   - The routes map holds IPv6 prefixes at their own length (fe80::/10 and ff00::/8 are host routes, as
//     169.254.0.0/16; the node's IPv6 addresses and an IPv6 Service CIDR too). IPv6 is never translated:
//     a destination in no route leaves by the pod's ENI whatever SNAT says (the VPC's egress-only internet
//     gateway), and to_pod takes any IPv6 source that is not the node's or a pod's onto the fast path.
//   - Out of an ENI, redirect_neigh uses the ENI entry's gateway when its family is the packet's, and the
//     kernel's FIB next hop out of that ENI otherwise: an ENI entry names its IPv4 subnet gateway, and IPv6
//     leaves through the VPC router's link-local address the node learnt from router advertisements
//     (accept_ra=2 on the primary ENI, so forwarding keeps it).
//   - The hop limit is decremented (no checksum to fix); hop limit 1 and a packet too big for the next hop
//     go to the host, which answers ICMPv6 time exceeded and Packet Too Big (IPv6 is never fragmented on
//     the way). A hop-by-hop options header, which every router reads, goes to the host
//     (to_host_ipv6_header). The one extension header the programs look through is the fragment header
//     (fragments go to the host, as IPv4's); any other makes the packet's protocol unknown, so its flow is
//     the host's.
//   - Flows: TCP and UDP are looked up in conntrack with the IPv6 tuple, ICMPv6 errors by the flow they quote
//     (the inner IPv6 header reversed), ICMPv6 echo follows its route, neighbour discovery arriving on an
//     ENI is the host's.
//   - NetworkPolicy: the same judgement on 16-byte peers; an IPv6 ipBlock matches IPv6 peers only (policy.go
//     keeps IPv4 out of ::/0), eniwire's conntrack entries of fast-path flows take the IPv6 tuple, and
//     eniw_forward is linked at the IPv6 FORWARD hook beside IPv4's (links/forward6), so the IPv6 flows the
//     host carries are judged too. A pod's policy is set per address: the agent writes it at each address
//     a pod holds (a dual-stack pod's IPv4 and IPv6, an IPv6 pod's node-local IPv4 egress address), each
//     compiled against the peers of its own family. Not family-agnostic yet: eniw_forward takes an IPv6
//     packet's L4 header to follow its fixed header (an extension header leaves it judged without ports).
//
// The pod's IPv6 default route mirrors IPv4's. The CNI plugin gives the pod its /128 (no DAD: the address
// is the node's to hand out) and a default route via fe80::1 on eth0 with a permanent neighbour entry
// fe80::1 -> the host veth's MAC, as it does for 169.254.1.1: no one holds fe80::1, so the host veth needs no
// proxy NDP and the pod never solicits its gateway; the host routes the pod's /128 on the host veth and
// resolves it with neighbour discovery from the host veth's own link-local address, which the veth must
// keep (disable_ipv6 0). The node sets net.ipv6.conf.all.forwarding=1, and accept_ra=2 on the primary ENI
// before it (forwarding makes accept_ra=1 ignore advertisements): nodenet.Config.IPv6, which the agent's
// ENABLE_IPv6 turns on. Host veths keep accept_ra=0 and accept_redirects=0 (set today); no proxy_ndp. The
// CNI plugin's part (the /128, the route and the neighbour entry in the pod; the agent adds the host /128
// route) is what TestPacketsFlowOverIPv6ThroughNamespaces plumbs by hand (plumbPod6).
//
// IPv4 egress of IPv6 pods. As the AWS VPC CNI does, each IPv6 pod holds a second, node-local IPv4 address
// of 169.254.172.0/22 (dptypes.IPv4EgressRange), one per pod, chosen and journaled by the controller with the
// pod's IPv6 address; the CNI plugin puts it on the pod's lo and makes it the source of the IPv4 default
// route via 169.254.1.1 on eth0. The agent writes it as a pods entry of its own on the pod's veth with no
// ENI (eni_ifindex 0), so from_pod's source check covers it unchanged (IPv4 from any other address is
// dropped as spoofed), and from_pod hands whatever it sends to the host, whatever its destination and
// whatever SNAT says: it has no ENI to leave by. There the SNAT table's egress rule ("from
// 169.254.172.0/22 out of the primary ENI", datapath/snat) translates it to the node's primary IPv4;
// conntrack un-NATs the replies, which to_pod hands to the host as it does every flow the host carries,
// and the host routes them by the egress /32 it routes to the veth. A pod's node-local address never
// appears in the VPC, so the fabric's source check and the VPC's need nothing new.
//
// # A router's manners
//
// On the fast paths the programs decrement the TTL and hand a packet that would expire to the host (which
// answers ICMP time exceeded), hand a packet too big for the next hop to the host (which fragments it or
// answers fragmentation needed), hand a packet with IPv4 options or a header checksum that does not verify
// to the host (which records itself in Record Route, refuses source routes unless accept_source_route, and
// drops bad checksums), and drop, counted as redirect_failed, a packet whose target interface is gone
// (and as write_failed one whose TTL could not be written). The TTL is their only write to a packet, made
// through a helper on the fast path alone: a direct write would have the verifier unclone every cloned
// packet before the program runs, host path included, and drop it uncounted when that copy fails. Every
// packet they pass on returns TC_ACT_UNSPEC (tcx next), so programs attached after eniwire's still see it
// (tcx.go says where eniwire's programs sit in the chain).
package datapath
