package cni_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/cni"
	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/cnitest"
)

const nodeAddr = "10.213.255.1"

// harness is one test's node: a namespace playing the node, the agent double, and the plugin run in-process
// with its thread inside the node namespace.
type harness struct {
	t     *testing.T
	node  ns.NetNS
	agent *cnitest.AgentDouble
	log   bytes.Buffer
}

func newHarness(t *testing.T, ips ...string) *harness {
	testenv.RequireRoot(t)
	t.Parallel()
	if len(ips) == 0 {
		for i := 10; i < 20; i++ {
			ips = append(ips, fmt.Sprintf("10.213.0.%d", i))
		}
	}
	h := &harness{t: t, node: cnitest.NewNode(t, nodeAddr)}
	h.agent = cnitest.StartAgentDouble(t, h.node, ips)
	return h
}

func (h *harness) conf(cniVersion string, prev []byte) []byte {
	c := map[string]any{
		"cniVersion": cniVersion, "name": "eniwire-test", "type": "eniwire",
		"agentSocket": h.agent.Socket,
	}
	if prev != nil {
		c["prevResult"] = json.RawMessage(prev)
	}
	b, _ := json.Marshal(c)
	return b
}

// run calls one command in-process from inside the node namespace and returns what it printed.
func (h *harness) run(cmd func(*cni.Plugin) func(*skel.CmdArgs) error, args *skel.CmdArgs) ([]byte, error) {
	var out bytes.Buffer
	p := cni.New()
	p.Stdout, p.Stderr = &out, &h.log
	var cmdErr error
	if err := h.node.Do(func(ns.NetNS) error { cmdErr = cmd(p)(args); return nil }); err != nil {
		h.t.Fatalf("entering node namespace: %v", err)
	}
	return out.Bytes(), cmdErr
}

func add(p *cni.Plugin) func(*skel.CmdArgs) error   { return p.Add }
func del(p *cni.Plugin) func(*skel.CmdArgs) error   { return p.Del }
func check(p *cni.Plugin) func(*skel.CmdArgs) error { return p.Check }
func status(p *cni.Plugin) func(*skel.CmdArgs) error {
	return p.Status
}
func gc(p *cni.Plugin) func(*skel.CmdArgs) error { return p.GC }

func podArgs(id string, pod ns.NetNS, conf []byte) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: id, Netns: pod.Path(), IfName: "eth0", StdinData: conf,
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=test;K8S_POD_NAME=" + id + ";K8S_POD_UID=uid-" + id,
	}
}

func cniCode(t *testing.T, err error) uint {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a CNI error", err)
	}
	return e.Code
}

func TestAddCheckDelWorksForEveryClaimedVersion(t *testing.T) {
	for _, ver := range cni.Versions.SupportedVersions() {
		t.Run("cniVersion "+ver, func(t *testing.T) {
			h := newHarness(t)
			pod := cnitest.NewNS(t)
			id := "inproc-" + strings.ReplaceAll(ver, ".", "")
			args := podArgs(id, pod, h.conf(ver, nil))

			out, err := h.run(add, args)
			if err != nil {
				t.Fatalf("ADD: %v\nlog: %s", err, h.log.String())
			}
			res, err := version.NewResult(ver, out)
			if err != nil {
				t.Fatalf("parsing %s result %s: %v", ver, out, err)
			}
			if res.Version() != ver {
				t.Errorf("result version = %s, want %s", res.Version(), ver)
			}
			cur, err := current.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			if len(cur.IPs) != 1 || cur.IPs[0].Address.String() != "10.213.0.10/32" || !cur.IPs[0].Gateway.Equal(plumbing.GatewayIP) {
				t.Fatalf("result IPs = %+v, want 10.213.0.10/32 via 169.254.1.1", cur.IPs)
			}
			if len(cur.Interfaces) != 2 || !strings.HasPrefix(cur.Interfaces[0].Name, "eniw") || cur.Interfaces[1].Sandbox != pod.Path() {
				t.Fatalf("result interfaces = %+v", cur.Interfaces)
			}
			hostVeth := cur.Interfaces[0].Name

			assertPodWired(t, h, pod, hostVeth, "10.213.0.10", cnitest.DefaultMTU)
			if got := h.agent.Calls(api.PathAssign); got != 1 {
				t.Errorf("ADD made %d Assign calls, want exactly 1", got)
			}

			again, err := h.run(add, args)
			if err != nil {
				t.Fatalf("repeated ADD: %v", err)
			}
			if !bytes.Equal(again, out) {
				t.Errorf("repeated ADD printed\n%s\nwant the same as the first\n%s", again, out)
			}

			if ok, _ := version.GreaterThanOrEqualTo(ver, "0.4.0"); ok {
				if _, err := h.run(check, podArgs(id, pod, h.conf(ver, out))); err != nil {
					t.Fatalf("CHECK of a wired pod: %v", err)
				}
				// Break the neighbour entry; CHECK must notice.
				_ = pod.Do(func(ns.NetNS) error {
					l, _ := netlink.LinkByName("eth0")
					return netlink.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: plumbing.GatewayIP, Family: netlink.FAMILY_V4})
				})
				if _, err := h.run(check, podArgs(id, pod, h.conf(ver, out))); err == nil || !strings.Contains(err.Error(), "neighbour") {
					t.Fatalf("CHECK after the neighbour entry was removed = %v, want an error naming the neighbour", err)
				}
			}

			if _, err := h.run(del, podArgs(id, pod, h.conf(ver, out))); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			assertNothingLeft(t, h, pod)
			if _, err := h.run(del, podArgs(id, pod, h.conf(ver, out))); err != nil {
				t.Fatalf("second DEL must succeed too: %v", err)
			}
		})
	}
}

// assertPodWired checks both sides of a wired pod, the MTU of both veth ends included.
func assertPodWired(t *testing.T, h *harness, pod ns.NetNS, hostVeth, ip string, mtu int) {
	t.Helper()
	var hostMAC net.HardwareAddr
	err := h.node.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(hostVeth)
		if err != nil {
			return err
		}
		hostMAC = l.Attrs().HardwareAddr
		if l.Attrs().MTU != mtu {
			return fmt.Errorf("host veth %s has MTU %d, want %d", hostVeth, l.Attrs().MTU, mtu)
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst != nil && r.Dst.String() == ip+"/32" {
				return nil
			}
		}
		return fmt.Errorf("no host route %s/32 dev %s", ip, hostVeth)
	})
	if err != nil {
		t.Fatalf("host side: %v", err)
	}
	cfg := plumbing.PodConfig{IfName: "eth0", IP: net.ParseIP(ip), HostMAC: hostMAC, MTU: mtu}
	podNS, err := plumbing.OpenPod(pod.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer podNS.Close()
	if err := podNS.Verify(cfg); err != nil {
		t.Fatalf("pod side: %v", err)
	}
}

// vethDeadline bounds the agent's background removal of a released pod's veth.
const vethDeadline = 5 * time.Second

// assertNothingLeft checks that no assignment is left and that the veths go within vethDeadline: the agent
// (double) removes them in the background after DEL, the pod's end with the host's.
func assertNothingLeft(t *testing.T, h *harness, pod ns.NetNS) {
	t.Helper()
	if links := cnitest.LinksGone(t, h.node, plumbing.HostVethPrefix, vethDeadline); len(links) != 0 {
		t.Errorf("host veths left %v after DEL: %v", vethDeadline, links)
	}
	if pod != nil {
		if links := cnitest.LinksGone(t, pod, "eth", vethDeadline); len(links) != 0 {
			t.Errorf("pod interfaces left %v after DEL: %v", vethDeadline, links)
		}
	}
	if as := h.agent.Assignments(); len(as) != 0 {
		t.Errorf("assignments left behind: %+v", as)
	}
}

func TestPodsReachTheHostAndEachOther(t *testing.T) {
	h := newHarness(t)
	podA, podB := cnitest.NewNS(t), cnitest.NewNS(t)
	conf := h.conf("1.1.0", nil)
	if _, err := h.run(add, podArgs("pod-a", podA, conf)); err != nil {
		t.Fatalf("ADD a: %v", err)
	}
	if _, err := h.run(add, podArgs("pod-b", podB, conf)); err != nil {
		t.Fatalf("ADD b: %v", err)
	}
	tests := []struct {
		name     string
		from, to ns.NetNS
		addr     string
	}{
		{"pod a reaches the node", podA, h.node, nodeAddr},
		{"pod a reaches pod b through the node", podA, podB, "10.213.0.11"},
		{"pod b reaches pod a through the node", podB, podA, "10.213.0.10"},
		{"the node reaches pod b", h.node, podB, "10.213.0.11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := cnitest.Serve(t, tc.to, tc.addr, "hello from "+tc.addr)
			got, err := cnitest.Fetch(tc.from, addr)
			if err != nil || got != "hello from "+tc.addr {
				t.Fatalf("fetch %s = %q, %v", addr, got, err)
			}
		})
	}
	for _, p := range []struct {
		id string
		ns ns.NetNS
	}{{"pod-a", podA}, {"pod-b", podB}} {
		if _, err := h.run(del, podArgs(p.id, p.ns, conf)); err != nil {
			t.Fatalf("DEL %s: %v", p.id, err)
		}
	}
	assertNothingLeft(t, h, nil)
}

func TestAddFailureAfterAssignmentGivesEverythingBack(t *testing.T) {
	h := newHarness(t)
	pod := cnitest.NewNS(t)
	h.agent.AnswerBadIPOnce()
	_, err := h.run(add, podArgs("bad-ip", pod, h.conf("1.1.0", nil)))
	if err == nil {
		t.Fatal("ADD with an unusable IP succeeded")
	}
	if h.agent.Calls(api.PathRelease) != 1 {
		t.Errorf("ADD made %d Release calls after failing, want 1", h.agent.Calls(api.PathRelease))
	}
	// No container of the pod ran with the IP: it goes back without cooldown.
	if h.agent.UnusedReleases() != 1 {
		t.Errorf("the failed ADD's Release did not say the IP was never used (%d of 1)", h.agent.UnusedReleases())
	}
	assertNothingLeft(t, h, pod)
}

func TestAddFailsRetryablyWhenThePoolIsEmptyAndLeavesNothing(t *testing.T) {
	h := newHarness(t, "10.213.0.10")
	podA, podB := cnitest.NewNS(t), cnitest.NewNS(t)
	conf := h.conf("1.1.0", nil)
	if _, err := h.run(add, podArgs("first", podA, conf)); err != nil {
		t.Fatalf("ADD first: %v", err)
	}
	_, err := h.run(add, podArgs("second", podB, conf))
	if err == nil || cniCode(t, err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "no IP address is free") {
		t.Fatalf("ADD on an empty pool = %v, want code 11 saying no IP is free", err)
	}
	if links := cnitest.Links(t, podB, "eth"); len(links) != 0 {
		t.Errorf("failed ADD left %v in the pod", links)
	}
	if _, err := h.run(del, podArgs("first", podA, conf)); err != nil {
		t.Fatalf("DEL first: %v", err)
	}
	assertNothingLeft(t, h, podA)
}

// TestStatusFailsOnlyWhileTheAgentCannotServeAdd: STATUS answers whether ADD can work at all. A pool with no
// free IP can (ADD fails retryably until it refills, or the node is full): STATUS succeeds, since a runtime
// turns a STATUS failure into the node's Ready going false.
func TestStatusFailsOnlyWhileTheAgentCannotServeAdd(t *testing.T) {
	h := newHarness(t, "10.213.0.10")
	conf := h.conf("1.1.0", nil)
	args := &skel.CmdArgs{StdinData: conf}
	wantUnavailable := func(what string, says string) {
		t.Helper()
		_, err := h.run(status, args)
		if err == nil || cniCode(t, err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), says) {
			t.Fatalf("STATUS %s = %v, want code 50 saying %q", what, err, says)
		}
	}
	if _, err := h.run(status, args); err != nil {
		t.Fatalf("STATUS of a ready agent with a free IP: %v", err)
	}
	h.agent.SetReady(false, "replaying journal")
	wantUnavailable("of a starting agent", "replaying journal")
	h.agent.SetReady(true, "")
	if _, err := h.run(add, podArgs("takes-last", cnitest.NewNS(t), conf)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if _, err := h.run(status, args); err != nil {
		t.Fatalf("STATUS with no free IP = %v, want success", err)
	}
	h.agent.SetHealth(api.Healthy, api.Healthy)
	if _, err := h.run(status, args); err != nil {
		t.Fatalf("STATUS of an agent whose journal and datapath work = %v, want success", err)
	}
	h.agent.SetHealth("journal is broken by an earlier I/O error", api.Healthy)
	wantUnavailable("with the journal broken", "journal is broken")
	h.agent.SetHealth(api.Healthy, "no ENI is up; bringing eni-1 up: no interface with this MAC")
	wantUnavailable("with no ENI up in the datapath", "can wire no pod: no ENI is up")
	bad := &skel.CmdArgs{StdinData: []byte(`{"cniVersion":"1.1.0","name":"x","agentSocket":"/nonexistent/agent.sock"}`)}
	if _, err := h.run(status, bad); err == nil || cniCode(t, err) != types.ErrPluginNotAvailable ||
		!strings.Contains(err.Error(), "/nonexistent/agent.sock") {
		t.Fatalf("STATUS without an agent = %v, want code 50 naming the socket", err)
	}
}

func TestGCReleasesOnlyAttachmentsTheRuntimeNoLongerKnows(t *testing.T) {
	h := newHarness(t)
	conf := h.conf("1.1.0", nil)
	for _, id := range []string{"keep", "drop-1", "drop-2"} {
		if _, err := h.run(add, podArgs(id, cnitest.NewNS(t), conf)); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
	}
	var gcConf map[string]any
	_ = json.Unmarshal(conf, &gcConf)
	gcConf["cni.dev/valid-attachments"] = []map[string]string{{"containerID": "keep", "ifname": "eth0"}}
	b, _ := json.Marshal(gcConf)
	if _, err := h.run(gc, &skel.CmdArgs{StdinData: b}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	as := h.agent.Assignments()
	if len(as) != 1 || as[0].ContainerID != "keep" {
		t.Fatalf("after GC the agent holds %+v, want only keep", as)
	}
	if links := cnitest.Links(t, h.node, plumbing.HostVethPrefix); len(links) != 1 {
		t.Errorf("after GC host veths are %v, want only keep's", links)
	}
}

// TestGCOfAnotherNetworkLeavesThisNetworksAssignments: under Multus two networks may use eniwire; the
// runtime's GC of one names only that network's attachments, and must not release the other's.
func TestGCOfAnotherNetworkLeavesThisNetworksAssignments(t *testing.T) {
	h := newHarness(t)
	conf := h.conf("1.1.0", nil)
	if _, err := h.run(add, podArgs("ours", cnitest.NewNS(t), conf)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	var gcConf map[string]any
	_ = json.Unmarshal(conf, &gcConf)
	gcConf["name"] = "another-network"
	gcConf["cni.dev/valid-attachments"] = []map[string]string{}
	b, _ := json.Marshal(gcConf)
	if _, err := h.run(gc, &skel.CmdArgs{StdinData: b}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if as := h.agent.Assignments(); len(as) != 1 || as[0].ContainerID != "ours" || as[0].Network != "eniwire-test" {
		t.Fatalf("after another network's GC the agent holds %+v, want ours, of network eniwire-test", as)
	}
}

func TestDelSucceedsWhenThingsAreAlreadyGone(t *testing.T) {
	h := newHarness(t)
	conf := h.conf("1.1.0", nil)

	t.Run("the netns is gone", func(t *testing.T) {
		pod := cnitest.NewNS(t)
		out, err := h.run(add, podArgs("ns-gone", pod, conf))
		if err != nil {
			t.Fatalf("ADD: %v", err)
		}
		args := podArgs("ns-gone", pod, h.conf("1.1.0", out))
		_ = pod.Close()
		if err := testutils.UnmountNS(pod); err != nil {
			t.Fatalf("removing the pod netns: %v", err)
		}
		if _, err := h.run(del, args); err != nil {
			t.Fatalf("DEL with a missing netns: %v", err)
		}
	})
	t.Run("the agent holds no record", func(t *testing.T) {
		pod := cnitest.NewNS(t)
		if _, err := h.run(del, podArgs("never-added", pod, conf)); err != nil {
			t.Fatalf("DEL of an unknown container: %v", err)
		}
	})
	t.Run("the agent is unreachable", func(t *testing.T) {
		pod := cnitest.NewNS(t)
		out, err := h.run(add, podArgs("no-agent", pod, conf))
		if err != nil {
			t.Fatalf("ADD: %v", err)
		}
		var c map[string]any
		_ = json.Unmarshal(h.conf("1.1.0", out), &c)
		c["agentSocket"] = "/nonexistent/eniwire.sock"
		b, _ := json.Marshal(c)
		if _, err := h.run(del, podArgs("no-agent", pod, b)); err != nil {
			t.Fatalf("DEL with the agent unreachable: %v", err)
		}
		// Nobody else will: the plugin deleted the pair before it returned.
		if links := cnitest.Links(t, pod, "eth"); len(links) != 0 {
			t.Errorf("DEL without agent left %v in the pod", links)
		}
		if links := cnitest.Links(t, h.node, plumbing.HostVethPrefix); len(links) != 0 {
			t.Errorf("DEL without agent left host veths %v", links)
		}
	})
}

func TestDelLeavesTheVethToTheAgentAndAReAddInTheKeptNamespaceWorks(t *testing.T) {
	for _, c := range []struct {
		name string
		when reAddMoment
	}{
		{"while the agent removes veths", reAddAnyTime},
		{"before the agent got to the released veth", reAddBeforeRemoval},
		{"when the agent removed the found pair before its Assign", reAddRemovedMeanwhile},
	} {
		t.Run(c.name, func(t *testing.T) { testReAddAfterDel(t, c.when) })
	}
}

// reAddMoment is where the re-ADD falls against the agent's removal of the released pair.
type reAddMoment int

const (
	reAddAnyTime          reAddMoment = iota // as it happens
	reAddBeforeRemoval                       // removal held: the ADD reuses the pair
	reAddRemovedMeanwhile                    // the ADD finds the pair, the removal runs before its Assign
)

func testReAddAfterDel(t *testing.T, when reAddMoment) {
	held := when != reAddAnyTime
	h := newHarness(t)
	conf := h.conf("1.1.0", nil)
	pod := cnitest.NewNS(t)
	args := podArgs("readd", pod, conf)
	first, err := h.run(add, args)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	resume := func() {}
	if held {
		resume = h.agent.HoldVethRemoval()
	}
	if _, err := h.run(del, podArgs("readd", pod, h.conf("1.1.0", first))); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if !strings.Contains(h.log.String(), "the agent removes the host veth") {
		t.Errorf("DEL did not leave the veth to the agent; log:\n%s", h.log.String())
	}
	// The runtime keeps the namespace and wires the sandbox again at once: the agent may not have removed
	// the old pair yet, so the ADD either reuses it (and the agent keeps it) or makes a new one.
	if when == reAddRemovedMeanwhile {
		h.agent.RemoveVethBeforeNextAssign()
	}
	again, err := h.run(add, args)
	resume()
	if err != nil {
		t.Fatalf("ADD after DEL in the same namespace: %v\nlog: %s", err, h.log.String())
	}
	res, err := version.NewResult("1.1.0", again)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	ip := cur.IPs[0].Address.IP.String()
	reused := strings.Contains(h.log.String(), `"reused":true`)
	switch when {
	case reAddBeforeRemoval:
		if !reused {
			t.Errorf("ADD did not reuse the pair the held agent had not removed; log:\n%s", h.log.String())
		}
	case reAddRemovedMeanwhile:
		if reused || !strings.Contains(h.log.String(), "making a new one") {
			t.Errorf("ADD did not make a new pair after the agent removed the one it found; log:\n%s", h.log.String())
		}
	}
	// Removals happen in order: once a later pod's veth is gone, the first DEL's removal was decided.
	marker := cnitest.NewNS(t)
	if _, err := h.run(add, podArgs("marker", marker, conf)); err != nil {
		t.Fatalf("ADD marker: %v", err)
	}
	if _, err := h.run(del, podArgs("marker", marker, conf)); err != nil {
		t.Fatalf("DEL marker: %v", err)
	}
	if links := cnitest.LinksGone(t, marker, "eth", vethDeadline); len(links) != 0 {
		t.Fatalf("marker's veth not removed within %v", vethDeadline)
	}
	// Wired, and with the new IP alone: VerifyPod rejects a leftover address of the first sandbox.
	assertPodWired(t, h, pod, cur.Interfaces[0].Name, ip, cnitest.DefaultMTU)
	if _, err := h.run(del, podArgs("readd", pod, h.conf("1.1.0", again))); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	assertNothingLeft(t, h, pod)
}

// TestAddTellsTheAgentAnAbsoluteNetnsPath: CNI_NETNS may be relative to the runtime's working directory,
// which the plugin inherits and the agent does not: the agent, which judges from the path whether a pod's
// namespace is gone, must get it absolute.
func TestAddTellsTheAgentAnAbsoluteNetnsPath(t *testing.T) {
	h := newHarness(t)
	pod := cnitest.NewNS(t)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relative, err := filepath.Rel(cwd, pod.Path())
	if err != nil || filepath.IsAbs(relative) {
		t.Fatalf("no relative path from %s to %s: %q, %v", cwd, pod.Path(), relative, err)
	}
	args := podArgs("relative", pod, h.conf("1.1.0", nil))
	args.Netns = relative
	if _, err := h.run(add, args); err != nil {
		t.Fatalf("ADD with CNI_NETNS %q: %v", relative, err)
	}
	as := h.agent.Assignments()
	if len(as) != 1 || as[0].Netns != pod.Path() {
		t.Fatalf("the agent was told %+v, want the netns %s", as, pod.Path())
	}
}
