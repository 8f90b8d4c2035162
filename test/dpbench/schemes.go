package dpbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/internal/progbench"
)

// Scheme is one way of getting the pod's packets out of its own ENI.
type Scheme interface {
	// Name is the scheme's label in tables and JSON: eniwire, vpc-cni or plain.
	Name() string
	// Install sets the scheme up for the measured pod alone.
	Install(ctx context.Context, t *Topology) error
	// Grow makes the scheme carry pods pods in all (the measured one and pods-1 others). Sizes only grow.
	Grow(ctx context.Context, t *Topology, pods int) error
	// Close removes what Install made outside the topology's namespaces.
	Close() error
}

// The measured pod's ENI route table in the VPC CNI's numbering: device number 1 → table 2.
const eniTable = 2

// fakePod is the i-th other pod (i ≥ 1): addresses in the VPC, distinct from every real one.
func fakePod(i int) netip.Addr {
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32([]byte{10, 88, 64, 0})+uint32(i))
	return netip.AddrFrom4(a)
}

// fakePod6 is the i-th other pod (i ≥ 1) of the IPv6 topology: addresses of the node's /80.
func fakePod6(i int) netip.Addr {
	a := podPrefix6.Addr().As16()
	binary.BigEndian.PutUint32(a[12:], 0x1000+uint32(i))
	return netip.AddrFrom16(a)
}

// Eniwire is scheme (a): the datapath package's programs, attached as the agent attaches them. On the IPv6
// topology the pod's entry is its IPv6 address on the primary ENI, as in the agent's IPv6 mode.
type Eniwire struct {
	// PinRoot is a bpffs directory of this run's own; it is removed by Close.
	PinRoot string
	// Logger receives the datapath's state changes; nothing when nil (10,000 pod entries log 10,000 lines).
	Logger *slog.Logger
	// NetworkPolicy opens the datapath as the agent does by default (the policy rows); the pod-count rows
	// keep it off, as they were first measured.
	NetworkPolicy bool

	d       *datapath.Datapath
	nsName  string
	pods    int
	fromPod *ebpf.Program
}

// benchPodIP is the pod that from_pod's timed test runs send from: BPF_PROG_TEST_RUN delivers on loopback.
var benchPodIP = netip.MustParseAddr("10.88.2.22")

const loopbackIfindex = 1

func (e *Eniwire) Name() string { return "eniwire" }

func (e *Eniwire) Install(ctx context.Context, t *Topology) error {
	if e.PinRoot == "" {
		return errors.New("installing eniwire: no PinRoot (the agent's default is never used here)")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return fmt.Errorf("removing the memlock limit: %w", err)
	}
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e.nsName = t.Node
	cfg := datapath.Config{
		PinRoot:       e.PinRoot,
		VPCCIDRs:      []netip.Prefix{VPCCIDR},
		NodeIPs:       []netip.Addr{primaryIP, eniIP, primaryIP6},
		SNAT:          true,
		NetworkPolicy: e.NetworkPolicy,
		Attach:        datapath.AttachTCX,
		Logger:        log,
	}
	return t.Do(t.Node, func() error {
		d, err := datapath.Open(cfg)
		if err != nil {
			return fmt.Errorf("opening the datapath: %w", err)
		}
		e.d = d
		if err := d.PutENI(t.Primary, primaryGW, t.PrimaryMAC, primarySubnet); err != nil {
			return err
		}
		if err := d.PutENI(t.ENI, eniGW, t.ENIMAC, eniSubnet); err != nil {
			return err
		}
		if t.IPv6 {
			// In IPv6 mode the pod's address is of the primary ENI's /80, and the pod's IPv4 (a node-local
			// egress address, which the measured flow never uses) is not written.
			if err := d.PutPod(PodIP6, t.HostVeth, t.Primary); err != nil {
				return err
			}
		} else if err := d.PutPod(PodIP, t.HostVeth, t.ENI); err != nil {
			return err
		}
		if err := d.AttachPodVeth(t.HostVeth); err != nil {
			return err
		}
		e.pods = 1
		if err := d.PutPod(benchPodIP, loopbackIfindex, t.ENI); err != nil {
			return err
		}
		// The programs are not exported; the pinned link (an API: links/from_pod-<ifindex>) names the
		// very program the pod's packets run through.
		e.fromPod, err = programOfLink(filepath.Join(e.PinRoot, "links", fmt.Sprintf("from_pod-%d", t.HostVeth)))
		return err
	})
}

func programOfLink(pin string) (*ebpf.Program, error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return nil, fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		return nil, fmt.Errorf("reading link %s: %w", pin, err)
	}
	p, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		return nil, fmt.Errorf("opening the program of link %s: %w", pin, err)
	}
	return p, nil
}

// Grow writes pod entries whose veths do not exist: a map entry costs the same whether or not its
// ifindex points anywhere.
func (e *Eniwire) Grow(_ context.Context, t *Topology, pods int) error {
	for ; e.pods < pods; e.pods++ {
		ip, eni := fakePod(e.pods), t.ENI
		if t.IPv6 {
			ip, eni = fakePod6(e.pods), t.Primary
		}
		if err := e.d.PutPod(ip, 1_000_000+e.pods, eni); err != nil {
			return err
		}
	}
	return nil
}

// FromPodCost runs from_pod on a TCP segment from the measured pod to the VPC host repeat times in the
// kernel (BPF_PROG_TEST_RUN) and returns the mean time per packet. It fails unless the verdict is a
// redirect out of the ENI, so the figure is the cost of the path the traffic takes.
func (e *Eniwire) FromPodCost(repeat int) (time.Duration, error) {
	var per time.Duration
	err := ns.WithNetNSPath(filepath.Join("/run/netns", e.nsName), func(ns.NetNS) error {
		// A test run arrives on loopback, and from_pod accepts a pod's packet only from the pod's own
		// veth, so the timed sender is a pod entry behind loopback taking the measured pod's path.
		ret, d, err := progbench.Run(e.fromPod, tcpFrame(benchPodIP, VPCHostIP), repeat)
		if err != nil {
			return fmt.Errorf("running from_pod: %w", err)
		}
		if ret != tcActRedirect {
			return fmt.Errorf("from_pod returned %d, want TC_ACT_REDIRECT (%d)", ret, tcActRedirect)
		}
		per = d
		return nil
	})
	return per, err
}

const tcActRedirect = 7

func (e *Eniwire) Close() error {
	var errs []error
	if e.fromPod != nil {
		errs = append(errs, e.fromPod.Close())
	}
	if e.d != nil {
		errs = append(errs, e.d.Close())
	}
	if e.nsName != "" {
		// Uninstall looks for cls_bpf filters in the calling namespace: the node's.
		errs = append(errs, ns.WithNetNSPath(filepath.Join("/run/netns", e.nsName), func(ns.NetNS) error {
			return datapath.Uninstall(e.PinRoot)
		}))
	}
	return errors.Join(errs...)
}

// VPCCNI is scheme (b): the AWS VPC CNI's host routing for pods on a secondary ENI. Per pod, `to podIP
// lookup main` at priority 512 and `from podIP lookup <ENI table>` at 1536; per ENI, a table holding the
// gateway and a default route, and `from <ENI primary IP> lookup <table>` at 32765; once per node,
// `fwmark 0x80/0x80 lookup main` at 1024. The ENI's subnet route leaves main, as the VPC CNI removes it.
// Only the routing is built: not the iptables SNAT and connmark chains (the traffic here is inside the
// VPC, where SNAT returns early), so this is a lower bound of the VPC CNI's per-packet cost.
type VPCCNI struct {
	pods int
}

func (v *VPCCNI) Name() string { return "vpc-cni" }

func (v *VPCCNI) Install(ctx context.Context, t *Topology) error {
	v.pods = 1
	return t.IPBatch(ctx, t.Node, fmt.Sprintf(`route add %[1]s dev %[2]s scope link table %[3]d
route add default via %[1]s dev %[2]s table %[3]d
route del %[4]s dev %[2]s
rule add fwmark 0x80/0x80 lookup main priority 1024
rule add from %[5]s lookup %[3]d priority 32765
%[6]s`, eniGW, SecondaryENI, eniTable, eniSubnet, eniIP, podRules("add", PodIP)))
}

func podRules(verb string, ip netip.Addr) string {
	return fmt.Sprintf("rule %[1]s to %[2]s/32 lookup main priority 512\nrule %[1]s from %[2]s/32 lookup %[3]d priority 1536\n", verb, ip, eniTable)
}

// Grow adds the other pods' rules in one `ip -batch`, then re-adds the measured pod's pair so it sits
// last at both priorities, as the newest pod on a busy node does: every packet, both ways, walks the
// rules of all the others first.
func (v *VPCCNI) Grow(ctx context.Context, t *Topology, pods int) error {
	if pods <= v.pods {
		return nil
	}
	var b strings.Builder
	for i := v.pods; i < pods; i++ {
		b.WriteString(podRules("add", fakePod(i)))
	}
	b.WriteString(podRules("del", PodIP))
	b.WriteString(podRules("add", PodIP))
	if err := t.IPBatch(ctx, t.Node, b.String()); err != nil {
		return fmt.Errorf("growing to %d pods: %w", pods, err)
	}
	v.pods = pods
	return nil
}

func (v *VPCCNI) Close() error { return nil }

// Plain is scheme (c), the floor: a routed veth and no policy. The node's main table sends the VPC host's
// subnet out of the secondary ENI (`10.88.9.0/24 via 10.88.2.1 dev eni1`); no ip rule, no BPF, no
// per-pod state besides the pod's /32 route that every scheme has. It is what forwarding through the host
// stack costs when nothing has to choose an ENI by source. On the IPv6 topology it adds nothing: the pod's
// /128 route and the node's IPv6 default route out of the primary ENI, the pod's own, are the topology's.
type Plain struct{}

func (Plain) Name() string { return "plain" }

func (Plain) Install(ctx context.Context, t *Topology) error {
	return t.IPBatch(ctx, t.Node, fmt.Sprintf("route add %s via %s dev %s\n",
		netip.PrefixFrom(VPCHostIP, 24).Masked(), eniGW, SecondaryENI))
}

func (Plain) Grow(context.Context, *Topology, int) error { return nil }

func (Plain) Close() error { return nil }
