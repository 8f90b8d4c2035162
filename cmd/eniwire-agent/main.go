// Command eniwire-agent is the node daemon: it wires the IPAM controller, its API socket, the datapath and
// the metrics endpoint.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/cilium/ebpf/rlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/agent"
	"github.com/eniwire/eniwire/controller/cniinstall"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/podsg"
	"github.com/eniwire/eniwire/controller/policywatch"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/hostroute"
	"github.com/eniwire/eniwire/datapath/nodenet"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "eniwire-agent:", err)
		os.Exit(1)
	}
}

func newLogger(s *settings) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(s.logLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if s.logFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

func run() error {
	args, uninstalling := os.Args[1:], false
	if len(args) > 0 && args[0] == "uninstall" {
		args, uninstalling = args[1:], true
	}
	s, err := parseSettings(args)
	if err != nil {
		return err
	}
	if s.datapath == "bpf" || uninstalling {
		// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK, whose default is far too small.
		if err := rlimit.RemoveMemlock(); err != nil {
			return fmt.Errorf("removing the memlock limit: %w", err)
		}
	}
	log := newLogger(s)
	if uninstalling {
		return uninstall(context.Background(), s, log)
	}
	log.Info("starting", "version", version.Version)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var clk clock.Clock = clock.Real{}
	if s.clockFactor > 0 && s.clockFactor != 1 {
		clk = clock.NewScaled(s.clockFactor)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	sdk, md, err := ec2client.NewSDK(ctx, ec2client.SDKOptions{Region: s.region})
	if err != nil {
		return err
	}
	api, err := ec2client.New(sdk, ec2client.Config{Clock: clk}, reg, log)
	if err != nil {
		return fmt.Errorf("building EC2 client: %w", err)
	}
	imds := metadata.IMDS{API: md}
	meta, err := metadata.Load(ctx, md, api, s.stateDir)
	if err != nil {
		return fmt.Errorf("reading the instance's facts: %w", err)
	}
	log.Info("instance", "id", meta.InstanceID, "type", meta.InstanceType, "subnet", meta.SubnetID,
		"maxENIs", meta.Limits.MaxENIs, "ipv4PerENI", meta.Limits.IPv4PerENI)

	ccfg := controller.Config{
		StateDir: s.stateDir, Cluster: s.cluster, WarmENITarget: s.warmENI, WarmIPTarget: s.warmIP,
		MinimumIPTarget: s.minIP, MaxENI: s.maxENI, MaxPods: s.maxPods, Cooldown: s.cooldown,
		EnablePrefixDelegation: s.prefixDelegation, WarmPrefixTarget: s.warmPrefix,
		EnableIPv6: s.ipv6 && !s.ipv4, DualStack: s.ipv6 && s.ipv4,
		DisableSubnetDiscovery: !s.subnetDiscovery,
		ReconcileInterval:      s.reconcile, MaxReconcileInterval: s.maxReconcile,
		OrphanSweepInterval: s.orphanSweep, PoolInterval: s.poolInterval, AddWait: s.addWait, ReleaseDelay: s.releaseDelay,
		GCGrace: s.gcGrace, StartJitter: s.jitter, JournalSync: s.journalSync,
		// The pods' veths follow AWS_VPC_ENI_MTU, capped by the primary ENI's: every assignment says it.
		PodMTU:                    nodenet.PodMTU(meta.PrimaryMAC, s.eniMTU, log),
		PodSecurityGroupsStandard: s.podSGMode == podSGStandard,
	}

	var eniConfigs subnet.ENIConfigSource
	if s.customNetwork {
		if eniConfigs, err = s.startENIConfigs(ctx, log); err != nil {
			return err
		}
		ccfg.CustomNetworking = true
	}

	var dp dptypes.Driver
	// The agent removes released pods' host veths in the background (see hostroute.Reaper).
	var veths *hostroute.Reaper
	// The BPF datapath's programs take over from an earlier agent's only once the journal's pods and ENIs are
	// in their maps (Attach, below).
	var loaded *nodenet.BPF
	switch s.datapath {
	case "bpf":
		services, err := parsePrefixes("--service-cidrs", s.serviceCIDRs)
		if err != nil {
			return err
		}
		bpf, err := nodenet.Open(ctx, nodenet.Config{
			PinRoot: s.pinRoot, PrimaryMAC: meta.PrimaryMAC, PrimaryIP: meta.PrimaryIP, VPCCIDRs: meta.VPCCIDRs,
			ServiceCIDRs: services, SNATEnv: s.snatEnv, MTU: s.eniMTU, SysctlRoot: s.sysctlRoot, IMDS: imds, Registerer: reg, Logger: log,
			// The per-pod traffic map holds as many pods as the pool may ever hand out IPs to.
			MaxPods:       pool.MaxPods(ccfg.PodSettings(), meta.Limits),
			NetworkPolicy: s.enforcesNetworkPolicy(),
			IPv6:          s.ipv6,
			DualStack:     s.ipv6 && s.ipv4,
		})
		if err != nil {
			return err
		}
		defer bpf.Close()
		veths = bpf.RemoveVethsInBackground(log)
		dp, loaded = bpf, bpf
	case "hostroute":
		veths = hostroute.NewReaper(hostroute.ReaperConfig{Logger: log})
		dp = &hostroute.Routes{Veths: veths}
	case "none":
		dp = dptypes.NoDriver{}
	default:
		return fmt.Errorf("unknown datapath %q (bpf, hostroute or none)", s.datapath)
	}
	// NetworkPolicy: with the bpf datapath and enforcement on, every ADD's pod has its state in the maps
	// before it comes up (the gate), and the watch keeps it current.
	var policies *policywatch.Watcher
	var gate controller.PodGate
	if loaded != nil && s.enforcesNetworkPolicy() {
		if policies, err = s.newNetworkPolicy(loaded, reg, log); err != nil {
			return err
		}
		gate = policies
	}
	// Security groups for pods: each ADD's pod gets the set its SecurityGroupPolicies give it.
	var podGroups *podsg.Watcher
	var groupsOf controller.PodSecurityGroups
	if s.podENI {
		if podGroups, err = s.newPodSecurityGroups(reg, log); err != nil {
			return err
		}
		groupsOf = podGroups
	}
	node, err := controller.New(ccfg, controller.Deps{
		EC2: api, IMDS: imds, Node: *meta, Clock: clk, Registerer: reg, Logger: log,
		Datapath: dp, ENIConfigs: eniConfigs, PodGate: gate, PodSecurityGroups: groupsOf,
		Urgent: func(ctx context.Context) context.Context { return ec2client.WithPriority(ctx, ec2client.Urgent) },
	})
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	defer node.Close()
	if loaded != nil {
		// Before any link moves to the new programs, their maps hold every journaled pod and ENI: an upgrade
		// that replaced the pods or enis map drops no pod's packets as spoofed.
		enis, pods := node.DatapathState()
		if err := loaded.Attach(ctx, enis, pods); err != nil {
			return err
		}
		if !s.enforcesNetworkPolicy() {
			// Enforcement off: no pod keeps the isolation an earlier agent wrote into the pinned maps.
			if err := policywatch.ClearAll(ctx, loaded, podAddrs(pods)); err != nil {
				return fmt.Errorf("turning NetworkPolicy enforcement off: %w", err)
			}
		}
	}

	sock, err := agent.ListenSocket(s.socket)
	if err != nil {
		return err
	}
	ops, err := net.Listen("tcp", s.metricsAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.metricsAddr, err)
	}
	log.Info("serving", "socket", s.socket, "metrics", ops.Addr().String())

	if veths != nil {
		go func() { _ = veths.Run(ctx) }()
	}
	// The Node's condition and startup taint follow the status in their own goroutine: an API server that does
	// not answer delays them, never an ADD.
	reporter, err := s.nodeReporter(node.Status, log)
	if err != nil {
		return err
	}
	if reporter != nil {
		go func() { _ = reporter.Run(ctx) }()
	}
	errc := make(chan error, 5)
	parts := 4
	handler := agent.Handler(node, log)
	if policies != nil {
		handler = agent.WithPolicy(handler, policies, log)
		parts++
		go func() { errc <- policies.Run(ctx) }()
		go func() {
			if err := loaded.ReadPolicyDenials(ctx, logDenial(policies)); ctx.Err() == nil {
				log.Warn("denied flows are no longer logged", "err", err)
			}
		}()
	}
	if podGroups != nil {
		parts++
		go func() { errc <- podGroups.Run(ctx) }()
	}
	go func() { errc <- node.Run(ctx) }()
	go func() { errc <- agent.Serve(ctx, sock, handler) }()
	go func() { errc <- agent.Serve(ctx, ops, agent.OpsHandler(node, metricsGatherer(reg, s.awsCNIMetrics))) }()
	go func() { errc <- cniinstall.WhenReady(ctx, s.installOptions(log), s.cniConflist, node.Ready) }()
	var first error
	for range parts {
		if err := <-errc; err != nil && first == nil {
			first = err
			stop()
		}
	}
	if errors.Is(first, context.Canceled) {
		first = nil
	}
	log.Info("stopped")
	return first
}
