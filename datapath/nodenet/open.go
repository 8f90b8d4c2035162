// Package nodenet is the agent's production datapath, the node's layer in package datapath's map of layers:
// it prepares the node for the pod path (forwarding, the SNAT rule, each ENI's link), loads the tc programs
// (package datapath) and drives them for the controller as a dptypes.Driver, with a /32 host route per pod
// (package hostroute) beside the maps. It is a library, so network-namespace tests run it in-process; the
// agent only wires it.
package nodenet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/snat"
)

// IMDS is where the driver reads a secondary ENI's primary IP: the instance metadata, which lists it first.
type IMDS interface {
	// PrimaryIP returns the first IPv4 address IMDS lists for the ENI with mac, or the zero Addr while IMDS
	// does not list the ENI yet (it lags after attach).
	PrimaryIP(ctx context.Context, mac string) (netip.Addr, error)
}

// Config is what Open needs to know about the node and its settings.
type Config struct {
	// PinRoot is the bpffs directory of the pinned maps and links (datapath.DefaultPinRoot in the agent).
	PinRoot string
	// PrimaryMAC and PrimaryIP are the primary ENI's: the SNAT rule's interface and address, a node address
	// for the programs.
	PrimaryMAC string
	PrimaryIP  netip.Addr
	VPCCIDRs   []netip.Prefix
	// ServiceCIDRs are handed to the host stack for kube-proxy.
	ServiceCIDRs []netip.Prefix
	// SNATEnv reads the SNAT settings by the AWS VPC CNI's variable names (snat.FromEnv); nil is os.Getenv.
	SNATEnv func(string) string
	// MTU is set on secondary ENIs (0: left as it is).
	MTU int
	// SysctlRoot is where the node's sysctls are written (default /proc/sys). In a container that is not
	// privileged /proc/sys is read-only, so the DaemonSet mounts the host's /proc/sys/net elsewhere; network
	// sysctls always show the writer's network namespace, the node's for a hostNetwork pod.
	SysctlRoot string
	// MaxPods is the most pods the node runs (pool.MaxPods): it sizes the per-pod traffic map
	// (datapath.DefaultMaxPods when 0).
	MaxPods int
	IMDS    IMDS
	// NetworkPolicy attaches the forward hook that judges NetworkPolicy on the flows the host carries
	// (datapath.Config.NetworkPolicy); the agent sets it with enforcement on.
	NetworkPolicy bool
	// IPv6 prepares the node for IPv6 pods (datapath/doc.go, IPv6): accept_ra=2 on the primary ENI, then
	// IPv6 forwarding, so the node keeps the default route the VPC router advertises once it forwards;
	// and the SNAT rule of IPv6 pods' IPv4 egress addresses (dptypes.IPv4EgressRange). The agent sets it in
	// IPv6 mode (ENABLE_IPv6).
	IPv6 bool
	// DualStack, with IPv6: the pods hold VPC IPv4 addresses too (the agent's dual-stack mode), so no IPv4
	// egress range is translated.
	DualStack bool
	// Registerer receives the programs' counters (nil: not registered).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Open prepares the node for the pod path (forwarding, the SNAT rule), loads the tc programs (reusing the pins
// of an earlier agent, so established flows keep flowing) and registers their counters. The programs an earlier
// agent attached keep running until Attach, which the caller makes with the journal's ENIs and pods before it
// drives the returned driver. The caller has removed the memlock limit. Close the returned driver when done.
func Open(ctx context.Context, cfg Config) (*BPF, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.SysctlRoot == "" {
		cfg.SysctlRoot = "/proc/sys"
	}
	getenv := cfg.SNATEnv
	if getenv == nil {
		getenv = os.Getenv
	}
	// Pod packets that take the host stack (Services, the internet) are forwarded from the pod's veth.
	if err := setSysctl(log, cfg.SysctlRoot, "net/ipv4/ip_forward", "1"); err != nil {
		return nil, err
	}
	primaryMAC, err := net.ParseMAC(cfg.PrimaryMAC)
	if err != nil {
		return nil, fmt.Errorf("reading the primary ENI's MAC: %w", err)
	}
	primary, err := linkByMAC(primaryMAC)
	if err != nil {
		return nil, fmt.Errorf("finding the primary ENI: %w", err)
	}
	if cfg.IPv6 {
		// In this order: with forwarding on, accept_ra=1 ignores advertisements and the node would lose
		// its IPv6 default route when it expires.
		for _, kv := range [][2]string{{"net/ipv6/conf/" + primary.Attrs().Name + "/accept_ra", "2"}, {"net/ipv6/conf/all/forwarding", "1"}} {
			if err := setSysctl(log, cfg.SysctlRoot, kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	base := snat.Config{PrimaryIP: cfg.PrimaryIP, PrimaryInterface: primary.Attrs().Name, VPCCIDRs: cfg.VPCCIDRs, Logger: log}
	if cfg.IPv6 && !cfg.DualStack {
		base.EgressCIDR = dptypes.IPv4EgressRange
	}
	scfg, err := snat.FromEnv(getenv, base)
	if err != nil {
		return nil, fmt.Errorf("reading SNAT settings: %w", err)
	}
	nat, err := snat.New(ctx, scfg)
	if err != nil {
		return nil, fmt.Errorf("preparing SNAT: %w", err)
	}
	if err := nat.Apply(ctx); err != nil {
		return nil, err
	}
	addrs, err := watchNodeAddrs(cfg.PrimaryIP, log)
	if err != nil {
		return nil, err
	}
	dp, err := datapath.Load(datapath.Config{
		PinRoot: cfg.PinRoot, VPCCIDRs: cfg.VPCCIDRs, ExcludeSNATCIDRs: scfg.ExcludeCIDRs, NodeIPs: addrs.current(), HostCIDRs: cfg.ServiceCIDRs,
		SNAT: !scfg.External, MaxPods: cfg.MaxPods, NetworkPolicy: cfg.NetworkPolicy,
		// Attach writes every journaled pod and ENI entry before the links move, so a map whose layout
		// changed with an upgrade can be replaced.
		MigrateMaps: true, Logger: log,
	})
	if err != nil {
		addrs.close()
		return nil, fmt.Errorf("loading the BPF datapath: %w", err)
	}
	addrs.follow(dp)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(datapath.NewCollector(dp)); err != nil {
			addrs.close()
			dp.Close()
			return nil, fmt.Errorf("registering datapath metrics: %w", err)
		}
	}
	return newBPF(dp, addrs, nat, cfg.IMDS, cfg.MTU, cfg.SysctlRoot, log), nil
}

// Uninstall removes what Open installed on the node: the SNAT rule, then the programs and the pinned maps
// under pinRoot. Run it only when eniwire leaves the node for good: pods still running lose their network.
func Uninstall(ctx context.Context, pinRoot string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	// External marks the configuration as needing no primary IP: Remove deletes ours whatever it was.
	if nat, err := snat.New(ctx, snat.Config{External: true, Logger: log}); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, nat.Remove(ctx))
	}
	if err := datapath.Uninstall(pinRoot); err != nil {
		errs = append(errs, fmt.Errorf("removing the BPF datapath: %w", err))
	} else {
		log.Info("BPF datapath removed", "pin_root", pinRoot)
	}
	return errors.Join(errs...)
}
