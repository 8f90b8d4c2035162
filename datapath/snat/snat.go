// Package snat owns the one masquerade rule eniwire needs: pod traffic that leaves the VPC through the
// primary ENI is source-NATed to the node's primary IP, except towards excluded CIDRs (the VPC's and
// AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS), and not at all with external SNAT. It touches only the nftables table
// `ip eniwire`, or, on iptables nodes, the nat chain ENIWIRE-SNAT and the one POSTROUTING rule jumping to it.
package snat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// Backend is the netfilter front end the rule is written with.
type Backend int

const (
	// BackendAuto picks iptables when the node's iptables is the legacy one and its binary is on PATH
	// (the node uses it and nft tables would be invisible to its tooling), nftables otherwise.
	BackendAuto Backend = iota
	BackendNFTables
	BackendIPTables
)

func (b Backend) String() string {
	switch b {
	case BackendAuto:
		return "auto"
	case BackendNFTables:
		return "nftables"
	case BackendIPTables:
		return "iptables"
	}
	return fmt.Sprintf("backend-%d", int(b))
}

// Randomize chooses the SNAT port selection, as AWS_VPC_K8S_CNI_RANDOMIZESNAT does.
type Randomize int

const (
	// RandomizePRNG is --random-fully / fully-random (the AWS VPC CNI's default, "prng").
	RandomizePRNG Randomize = iota
	// RandomizeHash is --random / random ("hashrandom").
	RandomizeHash
	// RandomizeNone keeps the kernel's sequential choice ("none").
	RandomizeNone
)

// Config says what to translate.
type Config struct {
	// External is AWS_VPC_K8S_CNI_EXTERNALSNAT=true: something outside the node translates, so the
	// agent installs no rule and removes its own.
	External bool
	// PrimaryIP is the address pod traffic is translated to.
	PrimaryIP netip.Addr
	// PrimaryInterface is the primary ENI's interface name: only traffic leaving by it is translated.
	PrimaryInterface string
	// ExcludeCIDRs are never translated: AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS, fixed for the Manager's life.
	ExcludeCIDRs []netip.Prefix
	// VPCCIDRs are never translated either; unlike ExcludeCIDRs, SetVPCCIDRs replaces them at run time.
	VPCCIDRs []netip.Prefix
	// EgressCIDR, when valid (IPv6 mode), is the node-local range of IPv6 pods' IPv4 egress addresses: what
	// leaves by the primary interface from it is translated to PrimaryIP whatever its destination, with
	// External too (the range is the node's own, nothing outside may see it).
	EgressCIDR netip.Prefix
	Randomize  Randomize
	Backend    Backend
	Logger     *slog.Logger
}

// ErrInvalidConfig is wrapped by New and FromEnv for unusable settings.
var ErrInvalidConfig = errors.New("invalid SNAT configuration")

// Names of what this package owns. Changing them strands rules on upgraded nodes: Remove also knows them.
const (
	nftTable      = "eniwire"
	nftChain      = "pod_snat"
	iptChain      = "ENIWIRE-SNAT"
	iptJumpMarker = "eniwire SNAT"
)

// Manager applies and removes the rule.
type Manager struct {
	backend Backend
	log     *slog.Logger

	mu  sync.Mutex // held while a rule is written: SetVPCCIDRs may race an Apply
	cfg Config
}

func checkIPv4(cidrs []netip.Prefix) error {
	for _, p := range cidrs {
		if !p.Addr().Is4() {
			return fmt.Errorf("%w: excluded CIDR %s is not IPv4", ErrInvalidConfig, p)
		}
	}
	return nil
}

// SetVPCCIDRs replaces the VPC's blocks among the excluded destinations and applies the rule again, so a
// block associated with the VPC later is never translated.
func (m *Manager) SetVPCCIDRs(ctx context.Context, vpc []netip.Prefix) error {
	if err := checkIPv4(vpc); err != nil {
		return err
	}
	m.mu.Lock()
	m.cfg.VPCCIDRs = slices.Clone(vpc)
	m.mu.Unlock()
	return m.Apply(ctx)
}

// New validates cfg and resolves the backend.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EgressCIDR.IsValid() && !cfg.EgressCIDR.Addr().Is4() {
		return nil, fmt.Errorf("%w: egress range %s is not IPv4", ErrInvalidConfig, cfg.EgressCIDR)
	}
	if !cfg.External || cfg.EgressCIDR.IsValid() {
		if err := checkIPv4(cfg.VPCCIDRs); err != nil {
			return nil, err
		}
		if !cfg.PrimaryIP.Is4() {
			return nil, fmt.Errorf("%w: primary IP %q is not IPv4", ErrInvalidConfig, cfg.PrimaryIP)
		}
		if cfg.PrimaryInterface == "" || len(cfg.PrimaryInterface) >= ifNameSize || strings.ContainsAny(cfg.PrimaryInterface, "\" \n") {
			return nil, fmt.Errorf("%w: primary interface %q", ErrInvalidConfig, cfg.PrimaryInterface)
		}
		if err := checkIPv4(cfg.ExcludeCIDRs); err != nil {
			return nil, err
		}
	}
	b := cfg.Backend
	if b == BackendAuto {
		b = detectBackend(ctx)
	}
	return &Manager{cfg: cfg, backend: b, log: cfg.Logger}, nil
}

// Backend reports the backend in use.
func (m *Manager) Backend() Backend { return m.backend }

// Apply makes the rules match the configuration, atomically per backend and idempotently. With External
// set it removes the pods' rule, and keeps only the egress rule of IPv6 mode when EgressCIDR is set.
func (m *Manager) Apply(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg.External && !m.cfg.EgressCIDR.IsValid() {
		return m.Remove(ctx)
	}
	// The backends write one set of excluded destinations: the VPC's blocks and the configured ones.
	cfg := m.cfg
	cfg.ExcludeCIDRs = append(slices.Clone(m.cfg.VPCCIDRs), m.cfg.ExcludeCIDRs...)
	var err error
	switch m.backend {
	case BackendNFTables:
		err = applyNFT(cfg)
	case BackendIPTables:
		err = applyIPTables(ctx, cfg)
	default:
		err = fmt.Errorf("%w: backend %s", ErrInvalidConfig, m.backend)
	}
	if err != nil {
		return fmt.Errorf("applying SNAT rule with %s: %w", m.backend, err)
	}
	m.log.Info("SNAT rule applied", "backend", m.backend.String(), "to", cfg.PrimaryIP, "interface", cfg.PrimaryInterface, "excluded", len(cfg.ExcludeCIDRs))
	return nil
}

// Remove deletes everything this package owns, with either backend (a node may have switched). Nothing
// to remove is not an error.
func (m *Manager) Remove(ctx context.Context) error {
	// The nftables table goes over netlink, with or without an nft binary; the iptables chain needs the
	// binary, and a node without it has no iptables chain of ours.
	errs := []error{removeNFT()}
	if _, err := exec.LookPath("iptables"); err == nil {
		errs = append(errs, removeIPTables(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing SNAT rule: %w", err)
	}
	m.log.Info("SNAT rule removed")
	return nil
}

func detectBackend(ctx context.Context) Backend {
	out, err := exec.CommandContext(ctx, "iptables", "--version").Output()
	if err == nil && bytes.Contains(out, []byte("legacy")) {
		return BackendIPTables
	}
	return BackendNFTables
}

// run executes a netfilter tool, feeding stdin, and folds its stderr into the error.
func run(ctx context.Context, stdin string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
