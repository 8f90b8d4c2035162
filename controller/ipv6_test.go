package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/nodeready"
	"github.com/eniwire/eniwire/test/simworld"
)

// ipv6Config is fastConfig in IPv6 mode (ENABLE_IPv6, with the prefix delegation it requires).
func ipv6Config(dir string) controller.Config {
	cfg := fastConfig(dir)
	cfg.EnableIPv6 = true
	cfg.EnablePrefixDelegation = true
	return cfg
}

// primaryPrefix returns the one /80 EC2 shows on the world's primary ENI.
func (w *world) primaryPrefix() (netip.Prefix, error) {
	e, ok := w.sim.ENI(w.inst.PrimaryENI)
	if !ok || len(e.IPv6Prefixes) != 1 {
		return netip.Prefix{}, fmt.Errorf("the primary ENI holds the /80s %v, want exactly one", e.IPv6Prefixes)
	}
	return netip.ParsePrefix(e.IPv6Prefixes[0])
}

// TestIPv6ModeGivesAFullNodeItsAddressesFromOneSlash80: on an m5.large in IPv6 mode, 110 pods (kubelet's max
// pods there) get distinct addresses of the one /80 the node took on its primary ENI with a single
// AssignIpv6Addresses, and distinct node-local IPv4 egress addresses; no ENI is created and no VPC IPv4
// address assigned; the 111th pod is refused with
// ErrMaxPods; a released address waits out its cooldown before a pod gets it again.
func TestIPv6ModeGivesAFullNodeItsAddressesFromOneSlash80(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	r := w.start(ipv6Config(w.dir), nil, nil)
	waitReady(t, r.node)
	start := time.Now()
	seen, egress := map[string]string{}, map[string]string{}
	const pods = 110
	for i := range pods {
		cid := fmt.Sprintf("pod-%d", i)
		a := assignRetrying(t, r.node, cid)
		if other, dup := seen[a.IP]; dup {
			t.Fatalf("address %s given to %s and %s", a.IP, other, cid)
		}
		if other, dup := egress[a.EgressIP]; dup || a.EgressIP == "" {
			t.Fatalf("IPv4 egress address %q given to %s and %s", a.EgressIP, other, cid)
		}
		seen[a.IP], egress[a.EgressIP] = cid, cid
	}
	took := time.Since(start)
	prefix, err := w.primaryPrefix()
	if err != nil {
		t.Fatal(err)
	}
	for ip, cid := range seen {
		if a := netip.MustParseAddr(ip); !prefix.Contains(a) {
			t.Errorf("%s got %s, outside the primary ENI's /80 %s", cid, ip, prefix)
		}
	}
	counters := w.sim.Counters()
	if n := counters["AssignIpv6Addresses"].Calls; n != 1 {
		t.Errorf("%d AssignIpv6Addresses calls for %d pods, want 1", n, pods)
	}
	for _, action := range []string{"CreateNetworkInterface", "AssignPrivateIpAddresses", "AttachNetworkInterface"} {
		if n := counters[action].Calls; n != 0 {
			t.Errorf("%d %s calls in IPv6 mode, want none", n, action)
		}
	}
	_, err = r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "pod-extra", IfName: "eth0"}})
	if !errors.Is(err, controller.ErrMaxPods) {
		t.Errorf("pod %d: got %v, want ErrMaxPods", pods+1, err)
	}
	// The Node condition says the node is full (issue 36 item 18: it said True, PoolGrowing).
	eventually(t, 10*time.Second, "the Node condition at max pods", func() error {
		if v := nodeready.Judge(r.node.Status()); v.Ready || v.Reason != api.PoolMaxPods {
			return fmt.Errorf("verdict %+v, want not ready with reason %s", v, api.PoolMaxPods)
		}
		return nil
	})
	t.Logf("%d pods addressed from %s in %v (wall), %d AssignIpv6Addresses, %d DescribeNetworkInterfaces",
		pods, prefix, took.Round(time.Millisecond), counters["AssignIpv6Addresses"].Calls, counters["DescribeNetworkInterfaces"].Calls)

	// The cooldown: pod-0's address is not handed out while it cools down, and is once it is over.
	freed := r.node.Snapshot().Assignment("pod-0", "eth0").IP
	if _, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "pod-0", IfName: "eth0"}}); err != nil {
		t.Fatalf("releasing pod-0: %v", err)
	}
	a := assignRetrying(t, r.node, "pod-next")
	if a.IP == freed {
		t.Fatalf("pod-next got %s, released a moment ago and still cooling down", freed)
	}
	if _, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "pod-next", IfName: "eth0"}}); err != nil {
		t.Fatalf("releasing pod-next: %v", err)
	}
	w.passVirtual(ipv6Config("").Cooldown+time.Second, nil)
	if a := assignRetrying(t, r.node, "pod-later"); a.IP != freed {
		t.Errorf("after the cooldown pod-later got %s, want the lowest free address %s back", a.IP, freed)
	}
	if err := w.checkBooks(r.node.Snapshot(), nil); err != nil {
		t.Error(err)
	}
}

// TestAnAmbiguousIPv6AssignIsReadBackBeforeAnyOtherAssign: an AssignIpv6Addresses that EC2 applied but
// answered with a 500, or whose answer was lost, is not sent again (by the SDK or the pool): the primary ENI
// is read from EC2 first, its /80 joins the books, pods get addresses of it, and it stays the only one.
func TestAnAmbiguousIPv6AssignIsReadBackBeforeAnyOtherAssign(t *testing.T) {
	// "dropped response, Describe lagging": the read back does not show the /80 for a while either (issue 36
	// item 15: the node took that for "not applied", assigned a second /80, and the first appeared later,
	// outside its books).
	for _, fault := range []string{"InternalError", "dropped response", "dropped response, Describe lagging"} {
		t.Run(fault, func(t *testing.T) {
			w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
			wire := &wireLog{next: http.DefaultTransport}
			client := w.ec2With(nil, &http.Client{Transport: wire, Timeout: 10 * time.Second})
			switch fault {
			case "InternalError":
				w.sim.Faults().FailAfterApply("AssignIpv6Addresses", "InternalError", 1)
			case "dropped response":
				w.sim.Faults().DropResponses("AssignIpv6Addresses", 1)
			default:
				w.sim.Faults().DropResponses("AssignIpv6Addresses", 1)
				w.sim.Faults().SetIPv6AssignLag(30 * time.Second)
			}
			r := w.start(ipv6Config(w.dir), client, nil)
			waitReady(t, r.node)
			a := assignRetrying(t, r.node, "pod-0")
			prefix, err := w.primaryPrefix()
			if err != nil {
				t.Fatal(err)
			}
			if !prefix.Contains(netip.MustParseAddr(a.IP)) {
				t.Errorf("pod-0 got %s, outside the primary's /80 %s", a.IP, prefix)
			}
			if c := w.sim.Counters()["AssignIpv6Addresses"]; c.Errors["InternalError"]+c.Dropped != 1 {
				t.Fatalf("the fault did not fire: %+v", c)
			}
			reqs := wire.snapshot()
			assigns := slices.DeleteFunc(slices.Clone(reqs), func(q wireReq) bool { return q.action != "AssignIpv6Addresses" })
			if len(assigns) != 1 {
				t.Errorf("%d AssignIpv6Addresses on the wire, want 1 (never sent again): %+v", len(assigns), assigns)
			}
			first := slices.IndexFunc(reqs, func(q wireReq) bool { return q.action == "AssignIpv6Addresses" })
			if !slices.ContainsFunc(reqs[first+1:], func(q wireReq) bool {
				return q.action == "DescribeNetworkInterfaces" && q.eni == w.inst.PrimaryENI
			}) {
				t.Errorf("the primary ENI was not read back after the ambiguous assign; wire: %+v", reqs[first:])
			}
			if err := w.checkBooks(r.node.Snapshot(), map[string]string{"pod-0": a.IP}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestIPv6ModeRefusesWhatItCannotServe: New refuses IPv6 mode with custom networking, on a Xen type and in a
// subnet without an IPv6 /64, saying why.
func TestIPv6ModeRefusesWhatItCannotServe(t *testing.T) {
	for _, c := range []struct {
		name      string
		itype     string
		dualStack bool
		custom    bool
		want      error
	}{
		{"custom networking", "m5.large", true, true, controller.ErrIPv6CustomNetworking},
		{"a Xen type", "m4.large", true, false, controller.ErrIPv6NotNitro},
		{"a subnet without an IPv6 block", "m5.large", false, false, controller.ErrIPv6NoSubnetBlock},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorldWith(t, simworld.Options{Type: c.itype, Factor: 200, DualStack: c.dualStack})
			cfg := ipv6Config(w.dir)
			cfg.CustomNetworking = c.custom
			_, err := controller.New(cfg, controller.Deps{EC2: w.ec2(nil), Node: w.nodeInfo()})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestIPv6ModeKeepsOneSlash80AndGivesBackASurplusOne: a primary ENI that already holds two /80s (taken by an
// earlier agent, or by hand) is read at start: the node takes none, adopts them, gives the one no pod holds
// back with UnassignIpv6Addresses, and hands pods addresses of the one it keeps.
func TestIPv6ModeKeepsOneSlash80AndGivesBackASurplusOne(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	out, err := w.ec2(nil).AssignIpv6Addresses(context.Background(), &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(w.inst.PrimaryENI), Ipv6PrefixCount: aws.Int32(2)})
	if err != nil || len(out.AssignedIpv6Prefixes) != 2 {
		t.Fatalf("assigning two /80s before the node starts: %v", err)
	}
	before := w.sim.Counters()["AssignIpv6Addresses"].Calls
	r := w.start(ipv6Config(w.dir), nil, nil)
	waitReady(t, r.node)
	a := assignRetrying(t, r.node, "pod-0")
	eventually(t, 20*time.Second, "one /80 left on the primary", func() error {
		if _, err := w.primaryPrefix(); err != nil {
			return err
		}
		return w.checkBooks(r.node.Snapshot(), map[string]string{"pod-0": a.IP})
	})
	kept, _ := w.primaryPrefix()
	if !slices.Contains(out.AssignedIpv6Prefixes, kept.String()) || !kept.Contains(netip.MustParseAddr(a.IP)) {
		t.Errorf("kept %s of %v; pod-0 has %s", kept, out.AssignedIpv6Prefixes, a.IP)
	}
	c := w.sim.Counters()
	if n := c["AssignIpv6Addresses"].Calls - before; n != 0 {
		t.Errorf("the node made %d AssignIpv6Addresses with two /80s on its primary, want none", n)
	}
	if n := c["UnassignIpv6Addresses"].Calls; n != 1 {
		t.Errorf("%d UnassignIpv6Addresses, want 1", n)
	}
}

// TestIPv6ModeStatusCountsTheSlash80: once the node holds its /80, the status counts its addresses as free
// up to kubelet's max pods and its pods as assigned, so the node reads ready for new pods (IPsFree) and the
// startup taint may go (a real IPv6 node kept it: the status counted IPv4 slots only, none in IPv6 mode).
func TestIPv6ModeStatusCountsTheSlash80(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 200, DualStack: true})
	r := w.start(ipv6Config(w.dir), nil, nil)
	waitReady(t, r.node)
	deadline := time.Now().Add(10 * time.Second)
	for _, err := w.primaryPrefix(); err != nil; _, err = w.primaryPrefix() {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 2 {
		assignRetrying(t, r.node, fmt.Sprintf("pod-%d", time.Now().UnixNano()))
	}
	st := r.node.Status()
	if st.Assigned != 2 || st.Warm != 110-2 {
		t.Errorf("status counts %d assigned and %d free, want 2 and %d (max pods 110)", st.Assigned, st.Warm, 110-2)
	}
	if v := nodeready.Judge(st); !v.Ready || v.Reason != nodeready.ReasonIPsFree || !nodeready.HoldsIPs(st) {
		t.Errorf("verdict %+v, holds IPs %v: want ready with IPs free, and the startup taint removable", v, nodeready.HoldsIPs(st))
	}
}
