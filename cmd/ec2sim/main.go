// Command ec2sim serves the simulated EC2 API, IMDS and the simulator's admin API on loopback. With no
// arguments it starts one VPC (10.0.0.0/16), two subnets and one m5.large instance, prints the endpoints
// and serves until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/internal/version"
	"github.com/eniwire/eniwire/test/ec2sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ec2sim:", err)
		os.Exit(1)
	}
}

// run parses flags, starts the simulator, prints its endpoints to out and serves until ctx ends.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("ec2sim", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var (
		ec2Addr     = fs.String("ec2-listen", "127.0.0.1:0", "listen address of the EC2 API")
		adminAddr   = fs.String("admin-listen", "127.0.0.1:0", "listen address of the admin API")
		imdsAddr    = fs.String("imds-listen", "127.0.0.1:0", "listen address of the first instance's IMDS (others get a free loopback port)")
		stateFile   = fs.String("state", "", "seed the state from this JSON file (vpcs, securityGroups, subnets, instances) instead of the default")
		podSubnets  = fs.Bool("pod-subnets", false, "seed the default VPC grown with a third zone and tagged pod subnets in 100.64.0.0/16")
		dualStack   = fs.Bool("dual-stack", false, "seed the default VPC with an IPv6 /56 and a /64 on each subnet")
		throttling  = fs.Bool("throttling", true, "apply AWS's per-action request token buckets")
		speedup     = fs.Float64("speedup", 1, "run every clock of the simulator this many times faster than the wall clock")
		attachDelay = fs.Duration("attach-delay", 0, "time an attachment stays attaching (simulated time)")
		detachDelay = fs.Duration("detach-delay", 0, "time an attachment stays detaching (simulated time)")
		region      = fs.String("region", "us-west-2", "region")
		account     = fs.String("account", "111122223333", "account id")
		seed        = fs.Int64("seed", 1, "seed of ids, MACs and random faults")
		scatter     = fs.Bool("scatter", false, "hand addresses out across each subnet, as EC2 does, so single IPs fragment it (else in order)")
		verbose     = fs.Bool("v", false, "log every state change to stderr")
		showVersion = fs.Bool("version", false, "print the version and exit")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *showVersion {
		fmt.Fprintln(out, "ec2sim", version.Version)
		return nil
	}
	if *podSubnets && *dualStack {
		return fmt.Errorf("-pod-subnets and -dual-stack are two different seeds; choose one")
	}
	if *speedup <= 0 {
		return fmt.Errorf("-speedup must be positive, got %v", *speedup)
	}
	cfg := ec2sim.DefaultConfig()
	cfg.Region, cfg.AccountID, cfg.Seed = *region, *account, *seed
	cfg.Throttling = *throttling
	cfg.ScatterAddresses = *scatter
	cfg.AttachDelay, cfg.DetachDelay = *attachDelay, *detachDelay
	if *speedup != 1 {
		cfg.Clock = clock.NewScaled(*speedup)
	}
	logLevel := slog.LevelWarn
	if *verbose {
		logLevel = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: logLevel}))

	sd := ec2sim.DefaultSeed(cfg.Region)
	if *podSubnets {
		sd = ec2sim.PodSubnetsSeed(cfg.Region)
	}
	if *dualStack {
		sd = ec2sim.DualStackSeed(cfg.Region)
	}
	if *stateFile != "" {
		var err error
		if sd, err = ec2sim.ReadSeed(*stateFile); err != nil {
			return err
		}
	}
	sim := ec2sim.New(cfg)
	var first string
	if len(sd.Instances) > 0 && sd.Instances[0].ID != "" {
		first = sd.Instances[0].ID
	}
	srv, err := ec2sim.Start(ctx, sim, ec2sim.ServerOptions{
		EC2Addr: *ec2Addr, AdminAddr: *adminAddr, EagerIMDS: true, Logger: cfg.Logger,
		IMDSListen: func(id string) (net.Listener, error) {
			if id == first || first == "" {
				first = id
				return net.Listen("tcp", *imdsAddr)
			}
			return net.Listen("tcp", "127.0.0.1:0")
		},
	})
	if err != nil {
		return fmt.Errorf("starting: %w", err)
	}
	defer srv.Close()
	insts, err := sim.Load(sd)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "EC2 endpoint:   %s\n", srv.EC2URL())
	fmt.Fprintf(out, "Admin endpoint: %s\n", srv.AdminURL())
	for _, in := range insts {
		fmt.Fprintf(out, "IMDS endpoint:  %s  (instance %s, %s, %s in %s)\n", srv.IMDSURL(in.ID), in.ID, in.Type, in.PrimaryIP, in.SubnetID)
	}
	fmt.Fprintf(out, "Region %s, account %s, throttling %v, speed-up %gx. Ctrl-C stops.\n", cfg.Region, cfg.AccountID, cfg.Throttling, *speedup)
	<-ctx.Done()
	shutdown := time.Now()
	srv.Close()
	cfg.Logger.Info("stopped", "after", time.Since(shutdown))
	return nil
}
