package datapath

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// ctEntry is a conntrack entry as the host would have made it: the tuple of the original direction and
// the tuple the reply is expected with (they differ when the host translated the flow).
type ctEntry struct {
	proto        uint8
	orig, expect [2]netip.AddrPort // source, destination
}

// addConntrack writes entries into the conntrack table of netns n, as if the host had carried those
// flows: the state the programs look up.
func addConntrack(t *testing.T, n ns.NetNS, entries ...ctEntry) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error {
		for _, e := range entries {
			family := netlink.InetFamily(netlink.FAMILY_V4)
			if e.orig[0].Addr().Is6() {
				family = netlink.FAMILY_V6
			}
			f := &netlink.ConntrackFlow{
				FamilyType: uint8(family),
				Forward:    ipTuple(e.proto, e.orig),
				Reverse:    ipTuple(e.proto, e.expect),
				TimeOut:    300,
			}
			if e.proto == protoTCP {
				f.ProtoInfo = &netlink.ProtoInfoTCP{State: 3} // ESTABLISHED
			}
			if err := netlink.ConntrackCreate(netlink.ConntrackTable, family, f); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("adding conntrack entries: %v", err)
	}
}

func ipTuple(proto uint8, ends [2]netip.AddrPort) netlink.IPTuple {
	return netlink.IPTuple{
		Protocol: proto,
		SrcIP:    ends[0].Addr().AsSlice(), SrcPort: ends[0].Port(),
		DstIP: ends[1].Addr().AsSlice(), DstPort: ends[1].Port(),
	}
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestDeletePodForgetsItsFlows(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	addConntrack(t, n,
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.1.21:40000"), ap("10.0.200.10:80")}, [2]netip.AddrPort{ap("10.0.2.22:8080"), ap("10.0.1.21:40000")}},
		ctEntry{protoTCP, [2]netip.AddrPort{ap("10.0.9.9:41000"), ap("10.0.1.10:30080")}, [2]netip.AddrPort{ap("10.0.2.22:8080"), ap("10.0.9.9:41000")}},
		ctEntry{protoUDP, [2]netip.AddrPort{ap("10.0.1.10:50000"), ap("10.0.3.23:53")}, [2]netip.AddrPort{ap("10.0.3.23:53"), ap("10.0.1.10:50000")}},
	)
	if err := n.Do(func(ns.NetNS) error { return d.DeletePod(pod2) }); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	left := conntrackFlows(t, n)
	if len(left) != 1 || !left[0].Forward.DstIP.Equal(addr("10.0.3.23").AsSlice()) {
		t.Errorf("conntrack after deleting pod2 holds %v; want only the flow of 10.0.3.23", left)
	}
}
