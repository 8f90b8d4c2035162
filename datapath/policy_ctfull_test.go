package datapath

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/containernetworking/plugins/pkg/ns"
)

// TestAFullConntrackTableDropsANewFlowInBothDirections: an isolated pod's new fast-path flow needs an entry
// in the kernel's conntrack, or its replies could not be told from a stranger's. With the table full (of
// assured entries, which the kernel does not evict early), the opening packet is dropped and counted as
// dropped_conntrack_full, not left to pass while its reply is dropped as the pod's ingress policy; and a
// new flow toward an isolated pod is decided the same way.
func TestAFullConntrackTableDropsANewFlowInBothDirections(t *testing.T) {
	d, n := policyTestNode(t)
	max := conntrackMax(t)
	// Fill the run namespace's table with pod1's allowed flows to 10.0.2.50-55, ports 80 and 8080 (its
	// egress rule), each given an assured entry by the program itself, until the first one finds no room.
	filled, full := fillConntrack(t, d, n, max)
	if full < 0 {
		t.Fatalf("after %d allowed flows (nf_conntrack_max %d) every new flow still got an entry", filled, max)
	}
	t.Logf("the table took %d entries of pod1's flows; nf_conntrack_max is %d", filled, max)
	runCases(t, d, n, []progCase{
		{"a new flow of pod1's with the table full is dropped, counted as conntrack full", fromPod, vethPod1, tcpWithFlags(pod1, addr("10.0.2.60"), 40500, 80, tcpSYN), tcActShot, VerdictFromPodCTFull},
		{"a new flow to the isolated pod2 is dropped the same way", toPod, 0, frame(vpcPeer, pod2, protoUDP, 999, 5005), tcActShot, VerdictToPodCTFull},
		{"a flow with an entry still passes", fromPod, vethPod1, tcpWithFlags(pod1, addr("10.0.2.50"), 1024, 80, tcpACK), tcActRedirect, VerdictFromPodOutENI},
	})
}

// conntrackMax is the kernel's nf_conntrack_max, the limit of each network namespace's table.
func conntrackMax(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || max <= 0 {
		t.Fatalf("nf_conntrack_max %q: %v", b, err)
	}
	return max
}

// fillConntrack opens pod1's allowed flows through from_pod, one SYN each, until one is dropped (the table
// full) or max+1000 were sent, and returns how many got through and the index of the dropped one (-1: none).
func fillConntrack(t *testing.T, d *Datapath, n ns.NetNS, max int) (filled, full int) {
	t.Helper()
	full = -1
	pkt := tcpWithFlags(pod1, addr("10.0.2.50"), 1024, 80, tcpSYN)
	l4 := ethLen + 20
	opts := &ebpf.RunOptions{Data: pkt, Context: ArrivingOn(vethPod1)}
	err := n.Do(func(ns.NetNS) error {
		for i := 0; i < max+1000; i++ {
			flow := i % (64512 * 2 * 6)
			binary.BigEndian.PutUint16(pkt[l4:], uint16(1024+flow%64512))
			binary.BigEndian.PutUint16(pkt[l4+2:], []uint16{80, 8080}[flow/64512%2])
			pkt[ethLen+19] = byte(50 + flow/(64512*2))
			setIPChecksum(pkt)
			ret, err := d.objs.EniwFromPod.Run(opts)
			if err != nil {
				return err
			}
			if ret == tcActShot {
				full = i
				return nil
			}
			filled++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("filling conntrack: %v", err)
	}
	return filled, full
}
