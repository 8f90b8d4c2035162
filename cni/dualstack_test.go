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

// A dual-stack pod (the agent's dual-stack mode), for every spec version the plugin claims: ADD puts its IPv4
// /32 and its IPv6 /128 on eth0 (no DAD), the IPv4 default route via 169.254.1.1 and the IPv6 one via
// fe80::1, each gateway with its neighbour entry; the result lists both addresses on eth0, each with its
// gateway, and no egress address (Verify fails on any other IPv4 address on eth0); the node routes both to the host veth. CHECK passes, and fails once either
// family's address or gateway neighbour is gone; DEL releases the assignment, both addresses with it.
func TestADualStackPodGetsAnIPv4AndAnIPv6AddressForEveryClaimedVersion(t *testing.T) {
	for _, ver := range cni.Versions.SupportedVersions() {
		t.Run("cniVersion "+ver, func(t *testing.T) {
			const ipv4, ipv6 = "10.213.0.10", "2600:1f14:e1a:e101:a::2"
			h := newHarness(t, ipv4+","+ipv6)
			pod := cnitest.NewNS(t)
			id := "ds-" + strings.ReplaceAll(ver, ".", "")
			args := podArgs(id, pod, h.conf(ver, nil))
			out, err := h.run(add, args)
			if err != nil {
				t.Fatalf("ADD: %v\nlog: %s", err, h.log.String())
			}
			if ok, _ := version.GreaterThanOrEqualTo(ver, "0.3.0"); ok {
				cur := addResultOf(t, ver, out)
				if got := resultAddrs(cur); got != fmt.Sprintf("eth0 %s/32 via 169.254.1.1, eth0 %s/128 via fe80::1", ipv4, ipv6) {
					t.Fatalf("result addresses: %s\n%s", got, out)
				}
				if got := resultRoutes(cur); got != "::/0 via fe80::1, 0.0.0.0/0 via 169.254.1.1" {
					t.Fatalf("result routes: %s\n%s", got, out)
				}
			} else if !bytes.Contains(out, []byte(ipv4+"/32")) || !bytes.Contains(out, []byte(ipv6+"/128")) {
				t.Fatalf("%s result lacks %s/32 or %s/128:\n%s", ver, ipv4, ipv6, out)
			}
			verifyWired(t, h, pod, plumbing.PodConfig{IfName: "eth0", IP: net.ParseIP(ipv4), IPv6: net.ParseIP(ipv6), MTU: cnitest.DefaultMTU},
				ipv4+"/32", ipv6+"/128")
			if err := pod.Do(func(ns.NetNS) error { return noDAD(ipv6) }); err != nil {
				t.Fatal(err)
			}

			if ok, _ := version.GreaterThanOrEqualTo(ver, "0.4.0"); ok {
				if _, err := h.run(check, podArgs(id, pod, h.conf(ver, out))); err != nil {
					t.Fatalf("CHECK of a wired dual-stack pod: %v", err)
				}
				checkNamesEachBreak(t, h, pod, id, ver, out, []checkBreak{
					{"without the IPv4 address", func() error {
						l, _ := netlink.LinkByName("eth0")
						a, _ := netlink.ParseAddr(ipv4 + "/32")
						return netlink.AddrDel(l, a)
					}, "lacks address " + ipv4},
					{"without the IPv6 address", func() error {
						l, _ := netlink.LinkByName("eth0")
						a, _ := netlink.ParseAddr(ipv6 + "/128")
						return netlink.AddrDel(l, a)
					}, ipv6},
					{"without the IPv4 gateway's neighbour entry", func() error {
						l, _ := netlink.LinkByName("eth0")
						return netlink.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: plumbing.GatewayIP, Family: netlink.FAMILY_V4})
					}, "neighbour entry for 169.254.1.1"},
					{"without the IPv6 gateway's neighbour entry", func() error {
						l, _ := netlink.LinkByName("eth0")
						return netlink.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: plumbing.GatewayIPv6, Family: netlink.FAMILY_V6})
					}, "neighbour"},
				})
				if err := pod.Do(func(ns.NetNS) error { return noDAD(ipv6) }); err != nil {
					t.Fatalf("after the repeated ADDs: %v", err)
				}
			}
			if _, err := h.run(del, podArgs(id, pod, h.conf(ver, out))); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			assertNothingLeft(t, h, pod)
			if h.agent.Free() != 1 {
				t.Errorf("the agent holds %d free pairs after DEL, want the pair back", h.agent.Free())
			}
		})
	}
}

// resultRoutes lists a result's routes as "<destination> via <gateway>".
func resultRoutes(r *current.Result) string {
	var out []string
	for _, rt := range r.Routes {
		out = append(out, fmt.Sprintf("%s via %s", &rt.Dst, rt.GW))
	}
	return strings.Join(out, ", ")
}
