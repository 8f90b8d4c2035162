package nodenet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestTheIPv4EgressAddressOfAnIPv6PodCarriesThePodsPolicy runs the production datapath in IPv6 mode in a node
// namespace: the policy watch sets an IPv6 pod's policy by its IPv6 address (before the pod comes up, as the
// policy gate does, and after), and the pods entry of the pod's IPv4 egress address must carry the same
// flags, so that eniw_forward judges what the pod sends to IPv4 peers by the pod's policy.
func TestTheIPv4EgressAddressOfAnIPv6PodCarriesThePodsPolicy(t *testing.T) {
	node, pinRoot := nodeNS(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	primaryMAC, _ := net.ParseMAC("02:00:00:00:20:01")
	eni := dptypes.ENI{ID: "eni-1", MAC: primaryMAC, Subnet: netip.MustParsePrefix("10.0.0.0/24"), Gateway: netip.MustParseAddr("10.0.0.1")}
	pod := dptypes.Pod{ContainerID: "c1", IfName: "eth0", IP: netip.MustParseAddr("2600:1f14:e1a:e101:3863::5"),
		EgressIP: netip.MustParseAddr("169.254.172.2"), HostVeth: "eniwpod6", ENI: eni}
	in := func(what string, f func() error) {
		t.Helper()
		if err := node.Do(func(ns.NetNS) error { return f() }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var b *BPF
	in("opening the datapath", func() (err error) {
		if _, err := addVeth("eth0", primaryMAC); err != nil {
			return err
		}
		l, err := addVeth(pod.HostVeth, nil)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		b, err = Open(ctx, Config{PinRoot: pinRoot, PrimaryMAC: primaryMAC.String(), PrimaryIP: netip.MustParseAddr("10.0.0.10"),
			VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, MTU: 9001, MaxPods: 29,
			IMDS: primaryIPs{}, Logger: log, IPv6: true})
		if err != nil {
			return err
		}
		return b.Attach(ctx, nil, nil)
	})
	t.Cleanup(func() {
		in("removing the datapath", func() error { _ = b.Close(); return Uninstall(ctx, pinRoot, log) })
	})

	egressOnly := func(peer string) dptypes.PodPolicy {
		return dptypes.PodPolicy{EgressIsolated: true, Egress: []dptypes.PeerPorts{{Peer: netip.MustParsePrefix(peer)}}}
	}
	// flags are the pods entries' flags of the pod's two addresses.
	flags := func() (podFlags, egressFlags uint32, err error) {
		entries, err := b.dp.Pods()
		if err != nil {
			return 0, 0, err
		}
		seen := 0
		for _, e := range entries {
			switch e.IP {
			case pod.IP:
				podFlags, seen = e.Flags, seen+1
			case pod.EgressIP:
				egressFlags, seen = e.Flags, seen+1
			}
		}
		if seen != 2 {
			return 0, 0, fmt.Errorf("pods map %+v lacks an entry of %s or %s", entries, pod.IP, pod.EgressIP)
		}
		return podFlags, egressFlags, nil
	}
	same := func(when string, wantIsolated bool) {
		t.Helper()
		p, e, err := flags()
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if p != e || (p != 0) != wantIsolated {
			t.Errorf("%s: the pod's entry has flags %#x, its IPv4 egress address's %#x; want equal and isolated %v", when, p, e, wantIsolated)
		}
	}

	if err := b.SetPodPolicy(ctx, pod.IP, egressOnly("10.0.0.0/16")); err != nil {
		t.Fatal(err)
	}
	in("PodUp", func() error { return b.PodUp(ctx, pod) })
	same("a policy set before the pod came up", true)
	if err := b.SetPodPolicy(ctx, pod.IP, egressOnly("192.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	same("the policy changed", true)
	if err := b.ClearPodPolicy(ctx, pod.IP); err != nil {
		t.Fatal(err)
	}
	same("the policy cleared", false)
	if err := b.SetPodPolicy(ctx, pod.IP, egressOnly("10.0.0.0/16")); err != nil {
		t.Fatal(err)
	}
	same("isolated again", true)
	in("PodDown", func() error { return b.PodDown(ctx, pod) })
	in("PodUp of a new pod on the same addresses", func() error { return b.PodUp(ctx, pod) })
	same("a new pod on the addresses, no policy set", false)
}
