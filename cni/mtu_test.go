package cni_test

import (
	"fmt"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/test/cnitest"
)

// The agent is the one source of the pod's MTU: both veth ends take what its answer says, whatever an
// earlier version's conflist still carries, and CHECK holds the pod to it.
func TestVethTakesTheMTUTheAgentSays(t *testing.T) {
	for _, mtu := range []int{1500, cnitest.DefaultMTU} {
		t.Run(fmt.Sprintf("the agent says %d", mtu), func(t *testing.T) {
			h := newHarness(t)
			h.agent.SetMTU(mtu)
			pod := cnitest.NewNS(t)
			conf := h.conf("1.1.0", nil)
			// An "mtu" left in a conflist by an earlier version says nothing any more.
			conf = []byte(strings.Replace(string(conf), "{", `{"mtu":1280,`, 1))
			out, err := h.run(add, podArgs("mtu", pod, conf))
			if err != nil {
				t.Fatalf("ADD: %v\nlog: %s", err, h.log.String())
			}
			res, err := version.NewResult("1.1.0", out)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := current.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			assertPodWired(t, h, pod, cur.Interfaces[0].Name, "10.213.0.10", mtu)
			if _, err := h.run(check, podArgs("mtu", pod, h.conf("1.1.0", out))); err != nil {
				t.Fatalf("CHECK of a pod at the agent's MTU: %v", err)
			}
			_ = pod.Do(func(ns.NetNS) error {
				l, err := netlink.LinkByName("eth0")
				if err != nil {
					return err
				}
				return netlink.LinkSetMTU(l, mtu-100)
			})
			if _, err := h.run(check, podArgs("mtu", pod, h.conf("1.1.0", out))); err == nil || !strings.Contains(err.Error(), "MTU") {
				t.Fatalf("CHECK of a pod whose MTU changed = %v, want an error naming the MTU", err)
			}
			if _, err := h.run(del, podArgs("mtu", pod, h.conf("1.1.0", out))); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}
