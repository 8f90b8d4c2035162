package vpcfabric

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// gateTable is the nftables table the fabric owns in the vpc and internet netns.
//
// The internet host plays an internet gateway: it translates only addresses that have a public IP, which
// here are the nodes' primary IPs. An nftables set in the internet netns holds them, and every IPv4 packet
// from any other source is dropped and counted, so a pod reaches the internet only through its node's SNAT.

const gateTable = "fabric"

const gateRuleset = `table ip ` + gateTable + ` {
	set nodes { type ipv4_addr; }
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr != @nodes counter drop
	}
}
`

// nft runs the nft tool inside the namespace at nsPath with script on stdin.
func nft(nsPath, script string, args ...string) (string, error) {
	var out []byte
	err := Do(nsPath, func() error {
		// A child forked from this locked thread starts in its namespace.
		cmd := exec.Command("nft", args...)
		cmd.Stdin = strings.NewReader(script)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	})
	return string(out), err
}

func (f *Fabric) installSourceCheck() error {
	if _, err := nft(f.vpc.path(), sourceCheckRuleset, "-f", "-"); err != nil {
		return fmt.Errorf("installing the router's source/dest check: %w", err)
	}
	return nil
}

// SourceCheckDrops is how many packets, IPv4 and IPv6, the router has dropped because their source is not
// an address of the ENI they came from (EC2's source/destination check).
func (f *Fabric) SourceCheckDrops() (uint64, error) {
	if err := f.usable(); err != nil {
		return 0, err
	}
	v4, err := readCounter(f.vpc.path(), "ip", "prerouting")
	if err != nil {
		return 0, err
	}
	v6, err := readCounter(f.vpc.path(), "ip6", "prerouting")
	return v4 + v6, err
}

func readCounter(nsPath, family, chain string) (uint64, error) {
	out, err := nft(nsPath, "", "list", "chain", family, gateTable, chain)
	if err != nil {
		return 0, fmt.Errorf("reading drop counter of %s: %w", chain, err)
	}
	m := counterPackets.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("reading drop counter of %s: no counter in %q", chain, out)
	}
	return strconv.ParseUint(m[1], 10, 64)
}

func (f *Fabric) installGate() error {
	if _, err := nft(f.inet.path(), gateRuleset, "-f", "-"); err != nil {
		return fmt.Errorf("installing the internet gateway's source filter: %w", err)
	}
	return nil
}

// allowInternet lets ip reach the internet host (or, with allow false, stops it).
func (f *Fabric) allowInternet(ip netip.Addr, allow bool) error {
	verb := "add"
	if !allow {
		verb = "delete"
	}
	script := fmt.Sprintf("%s element ip %s nodes { %s }\n", verb, gateTable, ip)
	if _, err := nft(f.inet.path(), script, "-f", "-"); err != nil {
		if !allow && strings.Contains(err.Error(), "No such file or directory") {
			return nil
		}
		return fmt.Errorf("updating the internet gateway for %s: %w", ip, err)
	}
	return nil
}

var counterPackets = regexp.MustCompile(`counter packets (\d+)`)

// EgressOnlyDrops is how many IPv6 packets the egress-only internet gateway dropped: from the internet,
// in no flow the VPC opened.
func (f *Fabric) EgressOnlyDrops() (uint64, error) {
	if err := f.usable(); err != nil {
		return 0, err
	}
	return readCounter(f.vpc.path(), "ip6", "forward")
}

// InternetDrops is how many packets the internet host has dropped because their source was not a node's
// primary IP.
func (f *Fabric) InternetDrops() (uint64, error) {
	if err := f.usable(); err != nil {
		return 0, err
	}
	return readCounter(f.inet.path(), "ip", "input")
}

// InternetAllowed lists the sources the internet host accepts (the nodes' primary IPs).
func (f *Fabric) InternetAllowed() ([]netip.Addr, error) {
	if err := f.usable(); err != nil {
		return nil, err
	}
	out, err := nft(f.inet.path(), "", "list", "set", "ip", gateTable, "nodes")
	if err != nil {
		return nil, fmt.Errorf("listing the internet gateway's allowed sources: %w", err)
	}
	var ips []netip.Addr
	i := strings.Index(out, "elements = {")
	if i < 0 {
		return nil, nil
	}
	rest := out[i+len("elements = {"):]
	if j := strings.Index(rest, "}"); j >= 0 {
		rest = rest[:j]
	}
	for _, s := range strings.Split(rest, ",") {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
			ips = append(ips, a)
		}
	}
	return ips, nil
}
