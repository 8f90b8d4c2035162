package datapath

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/bpf"
)

// specWithPodsField loads the programs' spec for cfg with one field of the pods map's value renamed: the
// same sizes, a layout BTF tells apart, as an earlier (or later) version's would be.
func specWithPodsField(t *testing.T, cfg Config, from, to string) *ebpf.CollectionSpec {
	t.Helper()
	spec, err := loadSpec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[bpf.EniwireMapPods]
	v, ok := btf.Copy(ms.Value).(*btf.Struct)
	if !ok {
		t.Fatalf("pods value is %T, want a struct", ms.Value)
	}
	renamed := false
	for i := range v.Members {
		if v.Members[i].Name == from {
			v.Members[i].Name, renamed = to, true
		}
	}
	if !renamed {
		t.Fatalf("pods value has no field %s: %v", from, v.Members)
	}
	ms.Value = v
	return spec
}

// fromPodOnLink is the ID of the from_pod program the node's host veth ifindex runs (by its tcx link).
func (f *fabric) fromPodOnLink(t *testing.T, ifindex int) ebpf.ProgramID {
	t.Helper()
	var res *link.QueryResult
	f.nodeDo(t, "querying tcx programs", func() (err error) {
		res, err = link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: hookFromPod.tcxType()})
		return err
	})
	if len(res.Programs) != 1 {
		t.Fatalf("tcx programs on %d: %v; want one", ifindex, res.Programs)
	}
	return res.Programs[0].ID
}

func progID(t *testing.T, p *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}

// podSender sends a datagram from pod1 to the VPC host every 200 µs until stop, so an upgrade's every moment
// meets the pod's packets; it counts the echoes that came back.
type podSender struct {
	stop   chan struct{}
	done   sync.WaitGroup
	echoes atomic.Int64
}

func startPodSender(t *testing.T, n ns.NetNS, dst netip.AddrPort) *podSender {
	t.Helper()
	var conn *net.UDPConn
	if err := n.Do(func(ns.NetNS) (err error) {
		conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &podSender{stop: make(chan struct{})}
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		buf := make([]byte, 64)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
			s.echoes.Add(1)
		}
	}()
	go func() {
		defer s.done.Done()
		defer conn.Close()
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				_, _ = conn.Write([]byte("upgrade"))
			}
		}
	}()
	return s
}

func (s *podSender) halt() { close(s.stop); s.done.Wait() }

// An upgrade whose pods map changed layout: Load leaves the earlier programs on every link, Restore fills the
// new (empty) map, Attach moves the links; a pod sending all along loses no packet as spoofed. The same
// upgrade with Attach before the restore (what the agent did before) drops the pod's packets, which is what
// the test would see if the order broke.
func TestUpgradeChangingThePodsLayoutDropsNoPodPacket(t *testing.T) {
	f := newFabric(t)
	root := testPinRoot(t)
	cfg := f.config(root, AttachTCX).withDefaults()
	cfg.Logger = testLogger(t)
	cfg.MigrateMaps = true
	t.Cleanup(func() { _ = f.node.Do(func(ns.NetNS) error { return Uninstall(root) }) })
	loadIn := func(spec *ebpf.CollectionSpec) *Datapath {
		t.Helper()
		var d *Datapath
		f.nodeDo(t, "loading", func() (err error) { d, err = load(cfg, spec); return err })
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	restoreSet := func() ([]ENI, []Pod) {
		return []ENI{{Ifindex: f.eni1, Gateway: gw1, MAC: f.eni1MAC, Subnet: prefix("10.77.1.0/24")},
				{Ifindex: f.eni2, Gateway: gw2, MAC: f.eni2MAC, Subnet: prefix("10.77.2.0/24")}},
			[]Pod{{IP: pod1IP, HostIfindex: f.host1, ENIIfindex: f.eni1}, {IP: pod2IP, HostIfindex: f.host2, ENIIfindex: f.eni2}}
	}
	echoAt := netip.AddrPortFrom(vpcHost, 7000)
	serveUDPEcho(t, f.vpc, echoAt)

	// The earlier agent: its pods map has a field the new one renamed.
	old := loadIn(specWithPodsField(t, cfg, "path", "reserved"))
	f.nodeDo(t, "attaching the earlier programs", old.Attach)
	f.wire(t, old)
	if err := udpExchange(f.pod1, netip.Addr{}, echoAt, 5*time.Second); err != nil {
		t.Fatalf("before the upgrade: %v", err)
	}
	r := mustReader(t, root)
	spoofed := counterNow(t, r, VerdictFromPodSpoof)
	_ = old.Close()

	t.Run("Load, Restore, Attach: the pod's packets flow throughout and none is dropped as spoofed", func(t *testing.T) {
		sender := startPodSender(t, f.pod1, echoAt)
		time.Sleep(50 * time.Millisecond)
		var d *Datapath
		f.nodeDo(t, "loading the new programs", func() (err error) { d, err = load(cfg, mustSpec(t, cfg)); return err })
		t.Cleanup(func() { _ = d.Close() })
		if pods, err := d.Pods(); err != nil || len(pods) != 0 {
			t.Fatalf("the new pods map holds %v (%v); want it replaced, empty", pods, err)
		}
		if f.fromPodOnLink(t, f.host1) == progID(t, d.objs.EniwFromPod) {
			t.Fatal("Load moved the pod's link to the new program")
		}
		// Between Load and Attach the earlier programs, on their own map, still carry the pod.
		loaded := sender.echoes.Load()
		time.Sleep(50 * time.Millisecond)
		if sender.echoes.Load() == loaded {
			t.Errorf("no echo came back between Load and Attach")
		}
		enis, pods := restoreSet()
		f.nodeDo(t, "restoring", func() error { return d.Restore(enis, pods) })
		f.nodeDo(t, "attaching", d.Attach)
		if f.fromPodOnLink(t, f.host1) != progID(t, d.objs.EniwFromPod) {
			t.Fatal("Attach left the pod's link on the earlier program")
		}
		before := sender.echoes.Load()
		time.Sleep(100 * time.Millisecond)
		sender.halt()
		if got := counterNow(t, r, VerdictFromPodSpoof); got != spoofed {
			t.Errorf("dropped_spoof went from %d to %d packets during the upgrade; want none", spoofed, got)
		}
		if sender.echoes.Load() == before {
			t.Errorf("no echo came back after the links moved (%d before)", before)
		}
		if err := udpExchange(f.pod1, netip.Addr{}, echoAt, 5*time.Second); err != nil {
			t.Errorf("after the upgrade: %v", err)
		}
	})

	t.Run("Attach before the restore drops the pod's packets as spoofed", func(t *testing.T) {
		var d *Datapath
		f.nodeDo(t, "loading another layout", func() (err error) {
			d, err = load(cfg, specWithPodsField(t, cfg, "path", "spare"))
			return err
		})
		t.Cleanup(func() { _ = d.Close() })
		f.nodeDo(t, "attaching at once", d.Attach)
		before := counterNow(t, r, VerdictFromPodSpoof)
		_ = udpExchange(f.pod1, netip.Addr{}, echoAt, 300*time.Millisecond)
		if got := counterNow(t, r, VerdictFromPodSpoof); got == before {
			t.Errorf("dropped_spoof stayed at %d with an empty pods map; the first case would not see a window", got)
		}
		enis, pods := restoreSet()
		f.nodeDo(t, "restoring late", func() error { return d.Restore(enis, pods) })
	})
}

func mustSpec(t *testing.T, cfg Config) *ebpf.CollectionSpec {
	t.Helper()
	spec, err := loadSpec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestAnUpgradeReplacingThePodsMapKeepsEveryPodsPolicy: the pods map of another layout starts empty, and
// the agent's journal, which Restore writes back, holds no policy flags. The flags the old map held are
// carried over, read by its own layout: a pod isolated before the upgrade is isolated, under the same
// policy's entries, from the first packet after it, not open until the policy watch lists everything again.
func TestAnUpgradeReplacingThePodsMapKeepsEveryPodsPolicy(t *testing.T) {
	root := testPinRoot(t)
	cfg := testConfig(true)
	cfg.PinRoot, cfg.Logger, cfg.MigrateMaps = root, testLogger(t), true
	cfg = cfg.withDefaults()
	t.Cleanup(func() { _ = Uninstall(root) })

	old, err := load(cfg, specWithPodsField(t, cfg, "path", "reserved"))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PutPod(pod1, vethPod1, eniA); err != nil {
		t.Fatal(err)
	}
	setPolicy(t, old, pod1, pod1Egress)
	want := podFlags(t, old, pod1)
	_ = old.Close()

	d, err := load(cfg, mustSpec(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if pods, err := d.Pods(); err != nil || len(pods) != 0 {
		t.Fatalf("the new pods map holds %v (%v); want it replaced, empty", pods, err)
	}
	// The journal's pods and ENIs written back, as the agent's Restore does.
	putTestState(t, d)
	if got := podFlags(t, d, pod1); got != want || got == 0 {
		t.Fatalf("after the upgrade pod1's flags are %#x, want %#x as before it", got, want)
	}
	n := runNS(t, testVeths...)
	runCases(t, d, n, []progCase{
		{"pod1's egress still denies the VPC", fromPod, vethPod1, frame(pod1, vpcPeer, protoTCP, 40003, 443), tcActShot, VerdictFromPodEgressDenied},
	})
}
