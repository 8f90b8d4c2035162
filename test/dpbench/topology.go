// Package dpbench measures the pod → VPC datapath of three schemes on the same network-namespace topology:
// eniwire's BPF programs, the AWS VPC CNI's source-based ip rules with a route table per ENI, and a plain
// routed veth with no policy at all (the floor). It reports TCP throughput (iperf3), UDP request/response
// rate and RTT, and from_pod's per-packet cost (BPF_PROG_TEST_RUN) at several pod counts; and eniwire
// against the plain routed veth over IPv6 (topology6.go). The method and the figures are in README.md next
// to this file.
package dpbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The simulated VPC, the same in every topology (each lives in its own namespaces, so they never meet):
//
//	pod 10.88.2.21 -- host0 [node] eth0 10.88.1.10 (primary ENI)   -- vpc0 10.88.1.1 [router] vpch 10.88.9.1 -- eth0 10.88.9.9 [vpchost]
//	                          [node] eni1 10.88.2.10 (secondary ENI) -- vpc1 10.88.2.1
//
// The pod holds a secondary IP of eni1, while the node's main table sends everything through eth0. The
// router filters reverse paths strictly, as EC2's source/destination check does: a packet from the pod
// that leaves by eth0 is dropped, so only source-based routing (or its BPF equivalent) gets through.
var (
	PodIP     = netip.MustParseAddr("10.88.2.21")
	VPCHostIP = netip.MustParseAddr("10.88.9.9")
	VPCCIDR   = netip.MustParsePrefix("10.88.0.0/16")

	primaryIP     = netip.MustParseAddr("10.88.1.10")
	primaryGW     = netip.MustParseAddr("10.88.1.1")
	primarySubnet = netip.MustParsePrefix("10.88.1.0/24")
	eniIP         = netip.MustParseAddr("10.88.2.10")
	eniGW         = netip.MustParseAddr("10.88.2.1")
	eniSubnet     = netip.MustParsePrefix("10.88.2.0/24")
)

// Interface names inside the node namespace.
const (
	PrimaryENI   = "eth0"
	SecondaryENI = "eni1"
	PodVeth      = "host0"
)

// Topology is one node with one pod, a VPC router and a VPC host, each in a named network namespace.
type Topology struct {
	Node, Pod, Router, VPCHost string // namespace names (under /run/netns)

	HostVeth, ENI, Primary int // ifindexes in Node
	ENIMAC, PrimaryMAC     net.HardwareAddr

	// IPv6 is set on the topology NewIPv6Topology builds (topology6.go): its servers listen on VPCHostIP6.
	IPv6 bool

	node *netlink.Handle
}

// UniquePrefix names this process's objects so that parallel runs and test packages never collide.
func UniquePrefix(tag string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("dpb-%s-%d-%s", tag, os.Getpid(), hex.EncodeToString(b))
}

// NewTopology builds the namespaces and links. Names start with prefix. On error, whatever was built is
// removed.
func NewTopology(ctx context.Context, prefix string) (*Topology, error) {
	return newTopology(ctx, prefix, false)
}

func newTopology(ctx context.Context, prefix string, ipv6 bool) (t *Topology, err error) {
	t = &Topology{Node: prefix + "-node", Pod: prefix + "-pod", Router: prefix + "-vpc", VPCHost: prefix + "-vpchost", IPv6: ipv6}
	defer func() {
		if err != nil {
			_ = t.Close()
			t = nil
		}
	}()
	for _, name := range t.namespaces() {
		if err := run(ctx, nil, "ip", "netns", "add", name); err != nil {
			return t, fmt.Errorf("creating netns %s: %w", name, err)
		}
		// No IPv6 in the IPv4 topology: router solicitations and MLD reports would muddy the interface
		// counters the test reads. The IPv6 one keeps it (ipv6Sysctls).
		kv := map[string]string{"net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1"}
		if ipv6 {
			kv = ipv6Sysctls
		}
		if err := t.sysctls(name, kv); err != nil {
			return t, err
		}
	}
	// Set before the links exist, so the router's interfaces are born with strict reverse-path filtering.
	if err := t.sysctls(t.Router, map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/rp_filter": "1", "net/ipv4/conf/default/rp_filter": "1"}); err != nil {
		return t, err
	}
	if err := t.sysctls(t.Node, map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/rp_filter": "2", "net/ipv4/conf/default/rp_filter": "2"}); err != nil {
		return t, err
	}
	if err := t.IPBatch(ctx, t.Node, fmt.Sprintf(`link add %[1]s type veth peer name vpc0 netns %[4]s
link add %[2]s type veth peer name vpc1 netns %[4]s
link add %[3]s type veth peer name eth0 netns %[5]s
addr add %[6]s/24 dev %[1]s
addr add %[7]s/24 dev %[2]s
link set lo up
link set %[1]s up
link set %[2]s up
link set %[3]s up
route add default via %[8]s dev %[1]s
route add %[9]s/32 dev %[3]s scope link
`, PrimaryENI, SecondaryENI, PodVeth, t.Router, t.Pod, primaryIP, eniIP, primaryGW, PodIP)); err != nil {
		return t, err
	}
	if err := t.IPBatch(ctx, t.Router, fmt.Sprintf(`link add vpch type veth peer name eth0 netns %s
addr add %s/24 dev vpc0
addr add %s/24 dev vpc1
addr add 10.88.9.1/24 dev vpch
link set lo up
link set vpc0 up
link set vpc1 up
link set vpch up
route add %s/32 via %s dev vpc1
`, t.VPCHost, primaryGW, eniGW, PodIP, eniIP)); err != nil {
		return t, err
	}
	if err := t.IPBatch(ctx, t.VPCHost, fmt.Sprintf(`addr add %s/24 dev eth0
link set lo up
link set eth0 up
route add default via 10.88.9.1 dev eth0
`, VPCHostIP)); err != nil {
		return t, err
	}
	h, err := netns.GetFromName(t.Node)
	if err != nil {
		return t, fmt.Errorf("opening netns %s: %w", t.Node, err)
	}
	defer h.Close()
	if t.node, err = netlink.NewHandleAt(h); err != nil {
		return t, fmt.Errorf("opening netlink in %s: %w", t.Node, err)
	}
	var hostMAC net.HardwareAddr
	for name, dst := range map[string]*int{PodVeth: &t.HostVeth, SecondaryENI: &t.ENI, PrimaryENI: &t.Primary} {
		l, err := t.node.LinkByName(name)
		if err != nil {
			return t, fmt.Errorf("finding %s in %s: %w", name, t.Node, err)
		}
		*dst = l.Attrs().Index
		switch name {
		case SecondaryENI:
			t.ENIMAC = l.Attrs().HardwareAddr
		case PrimaryENI:
			t.PrimaryMAC = l.Attrs().HardwareAddr
		case PodVeth:
			hostMAC = l.Attrs().HardwareAddr
		}
	}
	// The pod's plumbing, as eniwire's CNI plugin (and the VPC CNI's) leaves it.
	if err := t.IPBatch(ctx, t.Pod, fmt.Sprintf(`addr add %s/32 dev eth0
link set lo up
link set eth0 up
route add 169.254.1.1 dev eth0 scope link
route add default via 169.254.1.1 dev eth0
neigh add 169.254.1.1 lladdr %s dev eth0 nud permanent
`, PodIP, hostMAC)); err != nil {
		return t, err
	}
	if ipv6 {
		return t, t.addIPv6(ctx, hostMAC)
	}
	return t, nil
}

func (t *Topology) namespaces() []string { return []string{t.Node, t.Pod, t.Router, t.VPCHost} }

// Close deletes the namespaces, and with them every link and route.
func (t *Topology) Close() error {
	if t.node != nil {
		t.node.Close()
	}
	var errs []error
	for _, name := range t.namespaces() {
		if _, err := os.Stat(filepath.Join("/run/netns", name)); err != nil {
			continue
		}
		if err := run(context.Background(), nil, "ip", "netns", "del", name); err != nil {
			errs = append(errs, fmt.Errorf("deleting netns %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Do runs fn on a thread inside the named namespace.
func (t *Topology) Do(name string, fn func() error) error {
	return ns.WithNetNSPath(filepath.Join("/run/netns", name), func(ns.NetNS) error { return fn() })
}

// IPBatch feeds commands, one per line, to `ip -batch` inside a namespace: one exec for any number of
// rules or routes.
func (t *Topology) IPBatch(ctx context.Context, name, script string) error {
	if err := run(ctx, strings.NewReader(script), "ip", "-n", name, "-batch", "-"); err != nil {
		return fmt.Errorf("configuring %s: %w", name, err)
	}
	return nil
}

// TxPackets is how many packets the node sent out of an interface.
func (t *Topology) TxPackets(name string) (uint64, error) {
	l, err := t.node.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("reading counters of %s: %w", name, err)
	}
	if l.Attrs().Statistics == nil {
		return 0, fmt.Errorf("reading counters of %s: no statistics", name)
	}
	return l.Attrs().Statistics.TxPackets, nil
}

// RuleCount is the number of IPv4 policy-routing rules in the node, the three default ones included.
func (t *Topology) RuleCount() (int, error) {
	rules, err := t.node.RuleList(netlink.FAMILY_V4)
	if err != nil {
		return 0, fmt.Errorf("listing rules in %s: %w", t.Node, err)
	}
	return len(rules), nil
}

func (t *Topology) sysctls(name string, kv map[string]string) error {
	return t.Do(name, func() error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("setting %s in %s: %w", k, name, err)
			}
		}
		return nil
	})
}

func run(ctx context.Context, stdin *strings.Reader, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
