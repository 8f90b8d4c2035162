package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/snat"
)

// setSysctl writes key (like "net/ipv4/ip_forward") when it differs, logging the change.
func setSysctl(log *slog.Logger, key, val string) error {
	p := filepath.Join("/proc/sys", key)
	cur, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading sysctl %s: %w", key, err)
	}
	if strings.TrimSpace(string(cur)) == val {
		return nil
	}
	if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
		return fmt.Errorf("setting sysctl %s=%s: %w", key, val, err)
	}
	log.Info("sysctl set", "key", strings.ReplaceAll(key, "/", "."), "from", strings.TrimSpace(string(cur)), "to", val)
	return nil
}

// parsePrefixes reads a comma-separated CIDR list; empty items are skipped.
func parsePrefixes(name, list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// snatEnv answers snat.FromEnv with the settings' values, so that a flag given on the command line wins
// over the variable, as for every other setting.
func (s *settings) snatEnv(name string) string {
	switch name {
	case snat.EnvExternalSNAT:
		return s.externalSNAT
	case snat.EnvExcludeSNATCIDRs:
		return s.excludeSNAT
	case snat.EnvRandomizeSNAT:
		return s.randomizeSNAT
	}
	return os.Getenv(name)
}

// openBPF prepares the node for the pod path (forwarding, the SNAT rule), loads and attaches the tc
// programs (reusing the pins of an earlier agent, so established flows keep flowing), and registers their
// counters. The caller has removed the memlock limit.
func openBPF(ctx context.Context, s *settings, meta *metadata.Node, md metadata.IMDSAPI, reg prometheus.Registerer, log *slog.Logger) (*bpfDatapath, func(), error) {
	// Pod packets that take the host stack (Services, the internet) are forwarded from the pod's veth.
	if err := setSysctl(log, "net/ipv4/ip_forward", "1"); err != nil {
		return nil, nil, err
	}
	primary, err := linkByMAC(meta.PrimaryMAC)
	if err != nil {
		return nil, nil, fmt.Errorf("finding the primary ENI: %w", err)
	}
	services, err := parsePrefixes("--service-cidrs", s.serviceCIDRs)
	if err != nil {
		return nil, nil, err
	}
	scfg, err := snat.FromEnv(s.snatEnv, snat.Config{
		PrimaryIP: meta.PrimaryIP, PrimaryInterface: primary.Attrs().Name, ExcludeCIDRs: meta.VPCCIDRs, Logger: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading SNAT settings: %w", err)
	}
	nat, err := snat.New(ctx, scfg)
	if err != nil {
		return nil, nil, fmt.Errorf("preparing SNAT: %w", err)
	}
	if err := nat.Apply(ctx); err != nil {
		return nil, nil, err
	}
	dp, err := datapath.Open(datapath.Config{
		PinRoot: s.pinRoot, VPCCIDRs: meta.VPCCIDRs, NodeIPs: []netip.Addr{meta.PrimaryIP}, HostCIDRs: services,
		SNAT: !scfg.External,
		// The controller rewrites every pod and ENI entry from its journal at start, so a map whose layout
		// changed with an upgrade can be replaced.
		MigrateMaps: true, Logger: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("loading the BPF datapath: %w", err)
	}
	if err := reg.Register(datapath.NewCollector(dp)); err != nil {
		dp.Close()
		return nil, nil, fmt.Errorf("registering datapath metrics: %w", err)
	}
	// Close releases this process's handles only: programs, links and maps stay pinned for the next agent.
	return newBPFDatapath(dp, md, s.eniMTU, log), func() { dp.Close() }, nil
}
