package datapath

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/bpf"
)

// tc return codes (linux/pkt_cls.h).
const (
	tcActOK       = 0
	tcActShot     = 2
	tcActRedirect = 7
)

// Ifindexes in the maps need not exist for BPF_PROG_TEST_RUN, except the one a packet arrives on
// (skb->ifindex): loopback (1) by default, or a device of the caller's netns named in the context. So the
// pods' host veths are dummy links at these ifindexes in a namespace of the test's own (runNS).
const (
	loIfindex   = 1
	eniA        = 1 // "this" ENI in to_vpc cases: the loopback the test run arrives on
	eniB        = 41
	vethPod1    = 51
	vethPod2    = 52
	vethPodNoEN = 53
	vethOther   = 54 // a veth with no pod behind it
)

var testVeths = []int{vethPod1, vethPod2, vethPodNoEN, vethOther}

func putTestState(t *testing.T, d *Datapath) {
	t.Helper()
	mac := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 1}
	for _, e := range []struct {
		ifindex int
		gw      string
		subnet  string
	}{{eniA, "10.0.1.1", "10.0.1.0/24"}, {eniB, "10.0.2.1", "10.0.2.0/24"}} {
		// Writing the entry is what matters here; attaching to loopback and a missing ifindex is not.
		gk, _ := addrKey(addr(e.gw))
		sk, _ := routeKey(prefix(e.subnet))
		v := bpf.EniwireEniValue{Gateway: gk, Subnet: sk.Dst, SubnetPrefixlen: uint8(sk.Prefixlen), Family: 2}
		copy(v.Mac[:], mac)
		if err := d.objs.Enis.Put(uint32(e.ifindex), v); err != nil {
			t.Fatalf("putting ENI: %v", err)
		}
	}
	for _, p := range []struct {
		ip        string
		veth, eni int
	}{{"10.0.1.21", vethPod1, eniA}, {"10.0.2.22", vethPod2, eniB}, {"10.0.3.23", vethPodNoEN, 99}} {
		if err := d.PutPod(addr(p.ip), p.veth, p.eni); err != nil {
			t.Fatalf("PutPod: %v", err)
		}
	}
}

func testConfig(snat bool) Config {
	return Config{
		VPCCIDRs:  []netip.Prefix{prefix("10.0.0.0/16")},
		NodeIPs:   []netip.Addr{addr("10.0.1.10")},
		HostCIDRs: []netip.Prefix{prefix("10.0.200.0/24")},
		SNAT:      snat,
	}
}

type progCase struct {
	name    string
	prog    func(d *Datapath) *ebpf.Program
	on      int // the ifindex the packet arrives on; 0 is loopback
	pkt     []byte
	want    uint32
	verdict Verdict
}

// runOn runs prog on pkt as if it arrived on device ifindex (0: loopback) of netns n.
func runOn(n ns.NetNS, prog *ebpf.Program, ifindex int, pkt []byte) (ret uint32, err error) {
	opts := &ebpf.RunOptions{Data: pkt}
	if ifindex != 0 {
		opts.Context = ArrivingOn(ifindex)
	}
	err = n.Do(func(ns.NetNS) error {
		ret, err = prog.Run(opts)
		return err
	})
	return ret, err
}

func runCases(t *testing.T, d *Datapath, n ns.NetNS, cases []progCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := d.Counter(c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			ret, err := runOn(n, c.prog(d), c.on, c.pkt)
			if err != nil {
				t.Fatalf("running program: %v", err)
			}
			if ret != c.want {
				t.Errorf("program returned %d, want %d", ret, c.want)
			}
			after, err := d.Counter(c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			if after.Packets != before.Packets+1 {
				t.Errorf("counter %s/%s moved from %d to %d packets, want +1", c.verdict.Program(), c.verdict, before.Packets, after.Packets)
			}
			if after.Bytes <= before.Bytes {
				t.Errorf("counter %s bytes did not grow (%d -> %d)", c.verdict, before.Bytes, after.Bytes)
			}
		})
	}
}

func fromPod(d *Datapath) *ebpf.Program { return d.objs.FromPod }
func toPod(d *Datapath) *ebpf.Program   { return d.objs.ToPod }
func toVPC(d *Datapath) *ebpf.Program   { return d.objs.ToVpc }

func TestFromPodVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	pod1, pod2 := addr("10.0.1.21"), addr("10.0.2.22")
	runCases(t, d, n, []progCase{
		{"a frame that is not IPv4 passes to the host", fromPod, vethPod1, arpFrame(), tcActOK, VerdictFromPodNonIPv4},
		{"an IPv4 header shorter than 20 bytes is dropped", fromPod, vethPod1, badHeaderFrame(pod1, addr("10.0.9.9")), tcActShot, VerdictFromPodMalformed},
		{"a packet cut inside its L4 header is still routed by address", fromPod, vethPod1, cutFrame(pod1, addr("10.0.9.9")), tcActRedirect, VerdictFromPodOutENI},
		{"an unknown source is dropped as spoofed", fromPod, vethPod1, frame(addr("10.0.1.99"), addr("10.0.9.9"), protoUDP, 1000, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod sending with another pod's address is dropped", fromPod, vethPod1, frame(pod2, addr("192.0.2.7"), protoUDP, 1001, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod's address sent from a veth with no pod is dropped", fromPod, vethOther, frame(pod1, pod2, protoTCP, 1002, 80), tcActShot, VerdictFromPodSpoof},
		{"a pod's address arriving on another device than its veth is dropped", fromPod, 0, frame(pod1, addr("10.0.9.9"), protoUDP, 1003, 53), tcActShot, VerdictFromPodSpoof},
		{"a pod on this node is reached with redirect_peer", fromPod, vethPod1, frame(pod1, pod2, protoTCP, 40000, 80), tcActRedirect, VerdictFromPodToPeer},
		{"the node's own address goes to the host stack", fromPod, vethPod1, frame(pod1, addr("10.0.1.10"), protoTCP, 40001, 10250), tcActOK, VerdictFromPodToHost},
		{"a VPC address leaves by the pod's ENI", fromPod, vethPod2, frame(pod2, addr("10.0.9.9"), protoUDP, 40002, 53), tcActRedirect, VerdictFromPodOutENI},
		{"a host CIDR inside the VPC goes to the host stack", fromPod, vethPod1, frame(pod1, addr("10.0.200.10"), protoUDP, 40003, 53), tcActOK, VerdictFromPodToHost},
		{"the internet goes to the host stack to be masqueraded", fromPod, vethPod1, frame(pod1, addr("192.0.2.7"), protoTCP, 40004, 443), tcActOK, VerdictFromPodToHost},
		{"a pod whose ENI has no entry passes to the host", fromPod, vethPodNoEN, frame(addr("10.0.3.23"), addr("10.0.9.9"), protoICMP, 7, 0), tcActOK, VerdictFromPodNoENI},
	})

	t.Run("a dropped spoof leaves no host flow behind for the pod it claimed to be", func(t *testing.T) {
		k := bpf.EniwireFlowKey{Protocol: protoUDP, PodPort: htons(1001)}
		k.Pod, _ = addrKey(pod2)
		var seen uint64
		if err := d.objs.HostFlows.Lookup(k, &seen); !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Errorf("looking up the spoofed flow: err %v, want ErrKeyNotExist", err)
		}
	})

	t.Run("a flow handed to the host is remembered", func(t *testing.T) {
		k := bpf.EniwireFlowKey{Protocol: protoTCP, PodPort: htons(40004)}
		k.Pod, _ = addrKey(pod1)
		var seen uint64
		if err := d.objs.HostFlows.Lookup(k, &seen); err != nil {
			t.Fatalf("looking up host flow: %v", err)
		}
		if seen == 0 {
			t.Errorf("host flow has no timestamp")
		}
	})
	t.Run("per-pod traffic counts what the pod sent and received", func(t *testing.T) {
		traffic, err := d.PodTraffic()
		if err != nil {
			t.Fatal(err)
		}
		got := map[netip.Addr]PodTraffic{}
		for _, p := range traffic {
			got[p.IP] = p
		}
		// Spoofed packets count for no pod: neither the claimed sender nor the real one.
		if p := got[pod1]; p.TxPackets != 5 || p.RxPackets != 0 {
			t.Errorf("pod1 traffic = %+v, want 5 sent, 0 received", p)
		}
		if p := got[pod2]; p.TxPackets != 1 || p.RxPackets != 1 {
			t.Errorf("pod2 traffic = %+v, want 1 sent, 1 received", p)
		}
	})
}

func TestFromPodWithoutSNAT(t *testing.T) {
	d := openTest(t, testConfig(false))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	pod1, pod2 := addr("10.0.1.21"), addr("10.0.2.22")
	runCases(t, d, n, []progCase{
		{"the internet leaves by the pod's ENI", fromPod, vethPod1, frame(pod1, addr("192.0.2.7"), protoTCP, 40004, 443), tcActRedirect, VerdictFromPodOutENI},
		{"a host CIDR still goes to the host stack", fromPod, vethPod1, frame(pod1, addr("10.0.200.10"), protoUDP, 40003, 53), tcActOK, VerdictFromPodToHost},
		{"the node's own address still goes to the host stack", fromPod, vethPod1, frame(pod1, addr("10.0.1.10"), protoTCP, 40001, 10250), tcActOK, VerdictFromPodToHost},
		{"a pod sending with another pod's address is still dropped", fromPod, vethPod1, frame(pod2, addr("192.0.2.7"), protoTCP, 40005, 443), tcActShot, VerdictFromPodSpoof},
	})
}

func TestToPodVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	pod1 := addr("10.0.1.21")
	// The pod sent UDP from port 5353 to a Service IP: the host stack carries that flow.
	if ret, err := runOn(n, d.objs.FromPod, vethPod1, frame(pod1, addr("172.20.0.10"), protoUDP, 5353, 53)); err != nil || ret != tcActOK {
		t.Fatalf("from_pod to a Service IP: ret %d, err %v", ret, err)
	}
	runCases(t, d, n, []progCase{
		{"a packet for a known pod is redirected into it", toPod, 0, frame(addr("10.0.9.9"), pod1, protoTCP, 443, 40000), tcActRedirect, VerdictToPodToPeer},
		{"the reply of a host-handled flow goes to the host to be un-NATed", toPod, 0, frame(addr("10.0.9.9"), pod1, protoUDP, 53, 5353), tcActOK, VerdictToPodNATReply},
		{"the same port over another protocol goes to the pod", toPod, 0, frame(addr("10.0.9.9"), pod1, protoTCP, 53, 5353), tcActRedirect, VerdictToPodToPeer},
		{"a packet for no pod passes to the host", toPod, 0, frame(addr("10.0.9.9"), addr("10.0.1.10"), protoTCP, 443, 40000), tcActOK, VerdictToPodPass},
		{"a frame that is not IPv4 passes", toPod, 0, arpFrame(), tcActOK, VerdictToPodPass},
		{"an IPv4 header shorter than 20 bytes passes to the host, which drops it", toPod, 0, badHeaderFrame(addr("10.0.9.9"), pod1), tcActOK, VerdictToPodPass},
		{"a packet cut inside its L4 header is still delivered by address", toPod, 0, cutFrame(addr("10.0.9.9"), pod1), tcActRedirect, VerdictToPodToPeer},
	})
}

func TestToVPCVerdicts(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		// The test run arrives on loopback (ifindex 1), standing for ENI A.
		{"a pod of another ENI is moved to its own ENI", toVPC, 0, frame(addr("10.0.2.22"), addr("10.0.9.9"), protoTCP, 40000, 443), tcActRedirect, VerdictToVPCRerouted},
		{"a pod of this ENI is left as routed", toVPC, 0, frame(addr("10.0.1.21"), addr("10.0.9.9"), protoTCP, 40000, 443), tcActOK, VerdictToVPCPass},
		{"the node's own traffic is left as routed", toVPC, 0, frame(addr("10.0.1.10"), addr("10.0.9.9"), protoTCP, 40000, 443), tcActOK, VerdictToVPCPass},
		{"a pod whose ENI has no entry is left as routed", toVPC, 0, frame(addr("10.0.3.23"), addr("10.0.9.9"), protoTCP, 40000, 443), tcActOK, VerdictToVPCPass},
		{"a frame that is not IPv4 passes", toVPC, 0, arpFrame(), tcActOK, VerdictToVPCPass},
		{"an IPv4 header shorter than 20 bytes passes", toVPC, 0, badHeaderFrame(addr("10.0.2.22"), addr("10.0.9.9")), tcActOK, VerdictToVPCPass},
	})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
