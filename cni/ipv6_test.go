package cni_test

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/cni"
	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/test/cnitest"
)

// An IPv6 pod (the agent's IPv6 mode), for every spec version the plugin claims: ADD puts its IPv6 /128 on
// eth0 (no DAD), its IPv6 default route via fe80::1 with the gateway's neighbour entry, and its IPv4 egress
// /32 on the pod's lo with the IPv4 default route leaving from it; the result lists the IPv6 address on eth0 and
// the egress address on lo; the node routes both to the host veth. CHECK passes, and fails once the IPv6
// neighbour entry is gone or lo carries another egress address; DEL releases the assignment, both addresses with it.
func TestAnIPv6PodGetsItsAddressAndAnIPv4EgressAddressForEveryClaimedVersion(t *testing.T) {
	for _, ver := range cni.Versions.SupportedVersions() {
		t.Run("cniVersion "+ver, func(t *testing.T) {
			h := newHarness(t, "2600:1f14:e1a:e101:a::2", "2600:1f14:e1a:e101:a::3")
			pod := cnitest.NewNS(t)
			id := "v6-" + strings.ReplaceAll(ver, ".", "")
			args := podArgs(id, pod, h.conf(ver, nil))
			out, err := h.run(add, args)
			if err != nil {
				t.Fatalf("ADD: %v\nlog: %s", err, h.log.String())
			}
			const ipv6, egress = "2600:1f14:e1a:e101:a::2", "169.254.172.1"
			if ok, _ := version.GreaterThanOrEqualTo(ver, "0.3.0"); ok {
				cur := addResultOf(t, ver, out)
				if got := resultAddrs(cur); got != fmt.Sprintf("eth0 %s/128 via fe80::1, lo %s/32", ipv6, egress) {
					t.Fatalf("result addresses: %s\n%s", got, out)
				}
			} else if !bytes.Contains(out, []byte(ipv6+"/128")) || !bytes.Contains(out, []byte(egress+"/32")) {
				t.Fatalf("%s result lacks %s/128 or %s/32:\n%s", ver, ipv6, egress, out)
			}
			verifyWired(t, h, pod, plumbing.PodConfig{IfName: "eth0", IPv6: net.ParseIP(ipv6), EgressIP: net.ParseIP(egress), MTU: cnitest.DefaultMTU},
				ipv6+"/128", egress+"/32")
			if err := pod.Do(func(ns.NetNS) error { return noDAD(ipv6) }); err != nil {
				t.Fatal(err)
			}

			if ok, _ := version.GreaterThanOrEqualTo(ver, "0.4.0"); ok {
				if _, err := h.run(check, podArgs(id, pod, h.conf(ver, out))); err != nil {
					t.Fatalf("CHECK of a wired IPv6 pod: %v", err)
				}
				checkNamesEachBreak(t, h, pod, id, ver, out, []checkBreak{
					{"without the IPv6 gateway's neighbour entry", func() error {
						l, _ := netlink.LinkByName("eth0")
						return netlink.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: plumbing.GatewayIPv6, Family: netlink.FAMILY_V6})
					}, "neighbour"},
					{"with a second egress address", func() error {
						l, _ := netlink.LinkByName(plumbing.EgressIfName)
						a, _ := netlink.ParseAddr("169.254.172.99/32")
						return netlink.AddrAdd(l, a)
					}, "besides " + egress},
				})
			}
			if _, err := h.run(del, podArgs(id, pod, h.conf(ver, out))); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			assertNothingLeft(t, h, pod)
			if h.agent.Free() != 2 {
				t.Errorf("the agent holds %d free addresses after DEL, want both back", h.agent.Free())
			}
		})
	}
}

// verifyWired checks that the node routes each of dsts to the pod's one host veth, and that the pod holds
// want (with that veth's MAC as its gateways').
func verifyWired(t *testing.T, h *harness, pod ns.NetNS, want plumbing.PodConfig, dsts ...string) {
	t.Helper()
	hostVeth := cnitest.Links(t, h.node, plumbing.HostVethPrefix)
	if len(hostVeth) != 1 {
		t.Fatalf("host veths %v, want one", hostVeth)
	}
	want.HostMAC = assertRoutedToVeth(t, h.node, hostVeth[0], dsts...)
	podNS, err := plumbing.OpenPod(pod.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer podNS.Close()
	if err := podNS.Verify(want); err != nil {
		t.Fatalf("pod side: %v", err)
	}
}

// addResultOf parses what ADD printed for version ver (0.3.0 or later) as the current result type.
func addResultOf(t *testing.T, ver string, out []byte) *current.Result {
	t.Helper()
	res, err := version.NewResult(ver, out)
	if err != nil {
		t.Fatalf("parsing %s result %s: %v", ver, out, err)
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// checkBreak is one way to break a wired pod, and what CHECK's error must then name.
type checkBreak struct {
	what   string
	break_ func() error
	want   string
}

// checkNamesEachBreak breaks the pod id (wired by an ADD of version ver that printed out) each way in turn:
// CHECK must fail naming what broke, and a repeated ADD must put everything back, so that CHECK passes at
// the end.
func checkNamesEachBreak(t *testing.T, h *harness, pod ns.NetNS, id, ver string, out []byte, breaks []checkBreak) {
	t.Helper()
	for _, c := range breaks {
		if err := pod.Do(func(ns.NetNS) error { return c.break_() }); err != nil {
			t.Fatalf("breaking the pod (%s): %v", c.what, err)
		}
		if _, err := h.run(check, podArgs(id, pod, h.conf(ver, out))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("CHECK %s = %v, want an error naming %s", c.what, err, c.want)
		}
		if _, err := h.run(add, podArgs(id, pod, h.conf(ver, nil))); err != nil {
			t.Fatalf("repeated ADD: %v", err)
		}
	}
	if _, err := h.run(check, podArgs(id, pod, h.conf(ver, out))); err != nil {
		t.Fatalf("CHECK after the repeated ADDs: %v", err)
	}
}

// resultAddrs lists a result's addresses as "<interface> <address> [via <gateway>]".
func resultAddrs(r *current.Result) string {
	var out []string
	for _, ipc := range r.IPs {
		s := fmt.Sprintf("%s %s", r.Interfaces[*ipc.Interface].Name, &ipc.Address)
		if ipc.Gateway != nil {
			s += " via " + ipc.Gateway.String()
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// assertRoutedToVeth checks that the node routes each of dsts to hostVeth, and returns the veth's MAC.
func assertRoutedToVeth(t *testing.T, node ns.NetNS, hostVeth string, dsts ...string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	err := node.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(hostVeth)
		if err != nil {
			return err
		}
		mac = l.Attrs().HardwareAddr
		routes, err := netlink.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
	next:
		for _, dst := range dsts {
			for _, r := range routes {
				if r.Dst != nil && r.Dst.String() == dst {
					continue next
				}
			}
			return fmt.Errorf("no host route %s dev %s", dst, hostVeth)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("host side: %v", err)
	}
	return mac
}

// noDAD fails unless ip on eth0 is usable at once: not tentative, as without duplicate address detection.
func noDAD(ip string) error {
	l, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.IP.String() == ip {
			if a.Flags&0x40 != 0 { // IFA_F_TENTATIVE
				return fmt.Errorf("%s is tentative (flags %#x)", ip, a.Flags)
			}
			return nil
		}
	}
	return fmt.Errorf("no address %s on eth0", ip)
}
