package datapath

import (
	"context"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// egressToPeers is an egress policy allowing n VPC addresses from 10.0.9.1 (vpcPeer among them) on one TCP
// port.
func egressToPeers(n int, port uint16) dptypes.PodPolicy {
	p := dptypes.PodPolicy{EgressIsolated: true}
	for i := 1; i <= n; i++ {
		p.Egress = append(p.Egress, dptypes.PeerPorts{Peer: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 9 + byte(i/256), byte(i % 256)}), 32), Ports: []dptypes.PortRange{tcp(port, port)}})
	}
	return p
}

func policyPeerSetsCount(t *testing.T, d *Datapath) int {
	t.Helper()
	var (
		id   uint32
		sets bpf.EniwirePolicyPeerSetIds
		n    int
	)
	it := d.objs.PolicyPeerSets.Iterate()
	for it.Next(&id, &sets) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPoliciesWithTheSamePeersShareOnePeerSet: two pods whose policies allow the same 200 peers on
// different ports have two policies and one copy of the peers; each is judged on its own ports; the copy
// stays while one of them uses it, in this agent and in the next, and goes with the last.
func TestPoliciesWithTheSamePeersShareOnePeerSet(t *testing.T) {
	cfg := testConfig(true)
	cfg.PinRoot = testPinRoot(t)
	d := openTest(t, cfg)
	putTestState(t, d)
	pod3 := addr("10.0.1.31")
	if err := d.PutPod(pod3, vethOther, eniA); err != nil {
		t.Fatal(err)
	}
	n := runNS(t, testVeths...)
	const peers = 200
	setPolicy(t, d, pod1, egressToPeers(peers, 443))
	setPolicy(t, d, pod3, egressToPeers(peers, 8443))
	f1, f3 := podFlags(t, d, pod1), podFlags(t, d, pod3)
	if f1&policyIDMask == f3&policyIDMask {
		t.Fatalf("pod1 and pod3 share policy id %d, want one each (their ports differ)", f1&policyIDMask)
	}
	if s1, s3 := peerSetOf(t, d, f1, policyDirEgress), peerSetOf(t, d, f3, policyDirEgress); s1 == 0 || s1 != s3 {
		t.Errorf("egress peer sets %d and %d, want one shared", s1, s3)
	}
	if got, ports := policyEntryCount(t, d); got != peers || ports != 2 {
		t.Errorf("%d peer and %d port entries, want %d and 2 (one copy of the peers)", got, ports, peers)
	}
	judged := func(t *testing.T, d *Datapath, sport uint16) {
		t.Helper()
		runCases(t, d, n, []progCase{
			{"pod1 to a peer on its port", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, sport, 443), tcActRedirect, VerdictFromPodOutENI},
			{"pod1 to a peer on pod3's port", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, sport+1, 8443), tcActShot, VerdictFromPodEgressDenied},
			{"pod3 to a peer on its port", fromPod, vethOther, frame(pod3, vpcPeer, protoTCP, sport+2, 8443), tcActRedirect, VerdictFromPodOutENI},
			{"pod3 to a peer on pod1's port", fromPod, vethOther, frame(pod3, vpcPeer, protoTCP, sport+3, 443), tcActShot, VerdictFromPodEgressDenied},
			{"pod3 to an address not in the set", fromPod, vethOther, frame(pod3, addr("10.0.7.7"), protoTCP, sport+4, 8443), tcActShot, VerdictFromPodEgressDenied},
		})
	}
	judged(t, d, 41000)

	d2, err := Load(Config{PinRoot: cfg.PinRoot, Logger: testLogger(t), VPCCIDRs: cfg.VPCCIDRs, NodeIPs: cfg.NodeIPs, HostCIDRs: cfg.HostCIDRs, SNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got, _ := policyEntryCount(t, d2); got != peers {
		t.Errorf("a new agent found %d peer entries, want the %d it was left", got, peers)
	}
	ctx := context.Background()
	if err := d2.ClearPodPolicy(ctx, pod1); err != nil {
		t.Fatal(err)
	}
	if got, ports := policyEntryCount(t, d2); got != peers || ports != 1 {
		t.Errorf("pod1's policy cleared: %d peer and %d port entries, want pod3's %d and 1", got, ports, peers)
	}
	runCases(t, d2, n, []progCase{
		{"pod1, cleared, opens anything", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 42000, 8443), tcActRedirect, VerdictFromPodOutENI},
		{"pod3 still to a peer on its port", fromPod, vethOther, frame(pod3, vpcPeer, protoTCP, 42001, 8443), tcActRedirect, VerdictFromPodOutENI},
		{"pod3 still not on pod1's", fromPod, vethOther, frame(pod3, vpcPeer, protoTCP, 42002, 443), tcActShot, VerdictFromPodEgressDenied},
	})

	// A new policy with the same peers, set in the new agent, takes the set the old one wrote: its content is
	// read back with it.
	setPolicy(t, d2, pod1, egressToPeers(peers, 443))
	if got, _ := policyEntryCount(t, d2); got != peers {
		t.Errorf("pod1's policy set again in the new agent: %d peer entries, want the one set of %d", got, peers)
	}
	judged(t, d2, 43000)
	for _, p := range []netip.Addr{pod1, pod3} {
		if err := d2.ClearPodPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got, ports := policyEntryCount(t, d2); got != 0 || ports != 0 {
		t.Errorf("every policy cleared: %d peer and %d port entries, want none", got, ports)
	}
	if got := policyPeerSetsCount(t, d2); got != 0 {
		t.Errorf("every policy cleared: %d policy_peer_sets entries, want none", got)
	}
}

// TestAnEarlierAgentsPoliciesAreJudgedAfterTheUpgrade: an agent from before peer sets keyed policy_peers by
// the policy id and wrote no policy_peer_sets; the bytes are the same, so the map is kept, and the new agent
// gives each policy id in use the peer set of its own number: the pod is judged as before from the first
// packet, and its next policy replaces those entries.
func TestAnEarlierAgentsPoliciesAreJudgedAfterTheUpgrade(t *testing.T) {
	cfg := testConfig(true)
	cfg.PinRoot = testPinRoot(t)
	d := openTest(t, cfg)
	putTestState(t, d)
	n := runNS(t, testVeths...)
	setPolicy(t, d, pod1, egressToPeers(10, 443))
	// What the earlier agent left: the same entries, with no policy_peer_sets entry and the peers under the
	// policy's own id.
	id := podFlags(t, d, pod1) & policyIDMask
	var (
		k  bpf.EniwirePolicyPeerKey
		v  bpf.EniwirePolicyPeerValue
		ks []bpf.EniwirePolicyPeerKey
		vs []bpf.EniwirePolicyPeerValue
	)
	for it := d.objs.PolicyPeers.Iterate(); it.Next(&k, &v); {
		ks, vs = append(ks, k), append(vs, v)
	}
	for i := range ks {
		if err := d.objs.PolicyPeers.Delete(ks[i]); err != nil {
			t.Fatal(err)
		}
		ks[i].PeerSet = id + 100 // not the number of the set this agent wrote
		if err := d.objs.PolicyPeers.Update(ks[i], vs[i], ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.objs.PolicyPeerSets.Delete(id); err != nil {
		t.Fatal(err)
	}
	// The pod's flags name id+100, as the earlier agent's policy id, with its ports under it.
	var pk bpf.EniwirePolicyPortKey
	var pv bpf.EniwirePolicyPortValue
	for it := d.objs.PolicyPorts.Iterate(); it.Next(&pk, &pv); {
		if err := d.objs.PolicyPorts.Delete(pk); err != nil {
			t.Fatal(err)
		}
		pk.PolicyId = id + 100
		if err := d.objs.PolicyPorts.Update(pk, pv, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
		break // one port entry: tcp 443
	}
	var pod bpf.EniwirePodValue
	key := mustAddrKey(t, pod1)
	if err := d.objs.Pods.Lookup(key, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Flags = (pod.Flags &^ policyIDMask) | (id + 100)
	if err := d.objs.Pods.Update(key, pod, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d2, err := Load(Config{PinRoot: cfg.PinRoot, Logger: testLogger(t), VPCCIDRs: cfg.VPCCIDRs, NodeIPs: cfg.NodeIPs, HostCIDRs: cfg.HostCIDRs, SNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got := peerSetOf(t, d2, id+100, policyDirEgress); got != id+100 {
		t.Errorf("the earlier agent's policy %d names egress peer set %d, want its own number", id+100, got)
	}
	runCases(t, d2, n, []progCase{
		{"pod1 to a peer on its port, on the earlier agent's entries", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 44000, 443), tcActRedirect, VerdictFromPodOutENI},
		{"pod1 to a peer on another port", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 44001, 80), tcActShot, VerdictFromPodEgressDenied},
		{"pod1 to an address not in the policy", fromPod, vethPod1, frame(pod1, addr("10.0.7.7"), protoTCP, 44002, 443), tcActShot, VerdictFromPodEgressDenied},
	})
	setPolicy(t, d2, pod1, egressToPeers(10, 8443))
	if got, ports := policyEntryCount(t, d2); got != 10 || ports != 1 {
		t.Errorf("the next policy set: %d peer and %d port entries, want its own 10 and 1", got, ports)
	}
	if got := policyPeerSetsCount(t, d2); got != 1 {
		t.Errorf("the next policy set: %d policy_peer_sets entries, want 1", got)
	}
}

// TestThirtyWorkloadsOpenToTheSame5000PodsFit: thirty pods' policies letting the same 5,000 pods in, each on
// a port of its own, fit the default maps (a copy each overflowed the peer map at the 27th, whose pod then
// allowed nothing) and hold one copy of the peers.
func TestThirtyWorkloadsOpenToTheSame5000PodsFit(t *testing.T) {
	d := openTest(t, Config{VPCCIDRs: []netip.Prefix{prefix("10.0.0.0/8")}})
	const workloads, peers = 30, 5000
	for i := range workloads {
		if err := d.SetPodPolicy(context.Background(), capacityPod(i), ingressFromPods(peers, 0, uint16(1000+i))); err != nil {
			t.Fatalf("workload %d of %d: %v", i+1, workloads, err)
		}
	}
	if got, ports := policyEntryCount(t, d); got != peers || ports != workloads {
		t.Errorf("%d peer and %d port entries, want %d and %d", got, ports, peers, workloads)
	}
	if f := d.policies.flags[capacityPod(workloads-1)]; f&policyIDMask == 0 {
		t.Errorf("the last workload's flags %#x name no policy", f)
	}
}
