package e2e

import (
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// vethMTUs reads the MTU of a pod's eth0 and of its host veth (named by the agent's assignment).
func (w *world) vethMTUs(t *testing.T, p *pod) (podMTU, hostMTU int) {
	t.Helper()
	ph, err := netlink.NewHandleAt(mustNetns(t, p.ns.Path()))
	must(t, err)
	defer ph.Close()
	l, err := ph.LinkByName("eth0")
	must(t, err)
	podMTU = l.Attrs().MTU

	as, err := w.client.Assignments(ctxFor(t, 5*time.Second))
	must(t, err)
	hostVeth := ""
	for _, a := range as {
		if a.IP == p.ip.String() {
			hostVeth = a.HostVeth
		}
	}
	if hostVeth == "" {
		t.Fatalf("no assignment of %s (%s)", p.name, p.ip)
	}
	nh, err := netlink.NewHandleAt(mustNetns(t, w.node.NetnsPath))
	must(t, err)
	defer nh.Close()
	hl, err := nh.LinkByName(hostVeth)
	must(t, err)
	return podMTU, hl.Attrs().MTU
}

// assertVethMTU checks both ends of a pod's veth carry want.
func (w *world) assertVethMTU(t *testing.T, p *pod, want int) {
	t.Helper()
	podMTU, hostMTU := w.vethMTUs(t, p)
	if podMTU != want || hostMTU != want {
		t.Errorf("%s: eth0 MTU %d, host veth MTU %d; want both %d", p.name, podMTU, hostMTU, want)
	}
}

// The pod's veth follows AWS_VPC_ENI_MTU, and the primary ENI's MTU when that is smaller; no conflist says
// it (the default, 9001, is checked by TestANodeMovesPodPacketsWithTheBPFDatapath).
func TestPodVethsFollowTheENIMTU(t *testing.T) {
	t.Run("AWS_VPC_ENI_MTU=1500 gives the pod's eth0 and host veth 1500", func(t *testing.T) {
		w := newWorld(t, "AWS_VPC_ENI_MTU=1500")
		w.startAgent()
		p := w.addPod("mtu1500")
		w.assertVethMTU(t, p, 1500)
	})
	t.Run("a primary ENI at 1500 caps the default 9001", func(t *testing.T) {
		w := newWorld(t)
		h, err := netlink.NewHandleAt(mustNetns(t, w.node.NetnsPath))
		must(t, err)
		defer h.Close()
		primary, err := h.LinkByName("eth0")
		must(t, err)
		must(t, h.LinkSetMTU(primary, 1500))
		w.startAgent()
		p := w.addPod("primary1500")
		w.assertVethMTU(t, p, 1500)
	})
}
