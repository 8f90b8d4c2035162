package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// settings are the agent's configuration: every one is an environment variable (the AWS VPC CNI's name where
// one exists) and a flag of the same meaning; a flag given on the command line wins.
type settings struct {
	stateDir, socket, metricsAddr, cluster, logLevel, logFormat, region, datapath string
	warmENI, warmIP, minIP, maxENI, maxPods                                       int
	cooldown, reconcile, poolInterval, releaseDelay, gcGrace, jitter              time.Duration
	clockFactor                                                                   float64
}

type setting struct {
	flag, env, def, usage string
}

var table = []setting{
	{"state-dir", "ENIWIRE_STATE_DIR", "/var/lib/eniwire", "directory of the journal and the instance-type cache"},
	{"socket", "ENIWIRE_SOCKET", "/run/eniwire/agent.sock", "unix socket of the agent API (mode 0600)"},
	{"metrics-addr", "ENIWIRE_METRICS_ADDR", ":61678", "listen address of /metrics, /healthz and /readyz"},
	{"cluster-name", "CLUSTER_NAME", "", "cluster name, tagged on every ENI"},
	{"warm-eni-target", "WARM_ENI_TARGET", "1", "whole ENIs' worth of free IPs to keep (unused when a WARM_IP/MINIMUM_IP target is set)"},
	{"warm-ip-target", "WARM_IP_TARGET", "0", "free IPs to keep (0: unset)"},
	{"minimum-ip-target", "MINIMUM_IP_TARGET", "0", "IPs to hold at least (0: unset)"},
	{"max-eni", "MAX_ENI", "0", "ENIs to hold at most, primary included (0: the instance limit)"},
	{"max-pods", "MAX_PODS", "0", "pods the node runs at most; the pool never holds more IPs (0: ENIs x (IPs per ENI - 1) + 2)"},
	{"ip-cooldown-period", "IP_COOLDOWN_PERIOD", "120s", "time a released IP stays out of use (seconds or a duration)"},
	{"reconcile-interval", "ENIWIRE_RECONCILE_INTERVAL", "60s", "time between reconciles with EC2"},
	{"pool-interval", "ENIWIRE_POOL_INTERVAL", "5s", "time between pool checks when nothing wakes the pool manager"},
	{"release-delay", "ENIWIRE_RELEASE_DELAY", "60s", "hysteresis: surplus must last this long before IPs or ENIs are released"},
	{"gc-grace", "ENIWIRE_GC_GRACE", "5m", "our available ENIs younger than this are not collected"},
	{"start-jitter", "ENIWIRE_START_JITTER", "10s", "the first EC2 work waits a random part of this"},
	{"region", "AWS_REGION", "", "AWS region (empty: from the SDK's sources, then IMDS)"},
	{"datapath", "ENIWIRE_DATAPATH", "hostroute", "hostroute (pod /32 routes to host veths) or none (IPAM only: simulations)"},
	{"log-level", "ENIWIRE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"log-format", "ENIWIRE_LOG_FORMAT", "json", "json or text"},
	{"clock-factor", "ENIWIRE_CLOCK_FACTOR", "1", "virtual seconds per wall second (simulation only)"},
}

func parseSettings(args []string) (*settings, error) {
	fs := flag.NewFlagSet("eniwire-agent", flag.ContinueOnError)
	vals := map[string]*string{}
	for _, s := range table {
		def := s.def
		if v, ok := os.LookupEnv(s.env); ok {
			def = v
		}
		vals[s.flag] = fs.String(s.flag, def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var errs []error
	str := func(n string) string { return *vals[n] }
	num := func(n string) int {
		v, err := strconv.Atoi(str(n))
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", n, err))
		}
		return v
	}
	dur := func(n string) time.Duration {
		s := str(n)
		if secs, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(secs * float64(time.Second))
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", n, err))
		}
		return v
	}
	factor, err := strconv.ParseFloat(str("clock-factor"), 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("--clock-factor: %w", err))
	}
	s := &settings{
		stateDir: str("state-dir"), socket: str("socket"), metricsAddr: str("metrics-addr"), cluster: str("cluster-name"),
		logLevel: str("log-level"), logFormat: str("log-format"), region: str("region"), datapath: str("datapath"),
		warmENI: num("warm-eni-target"), warmIP: num("warm-ip-target"), minIP: num("minimum-ip-target"),
		maxENI: num("max-eni"), maxPods: num("max-pods"),
		cooldown: dur("ip-cooldown-period"), reconcile: dur("reconcile-interval"), poolInterval: dur("pool-interval"),
		releaseDelay: dur("release-delay"), gcGrace: dur("gc-grace"), jitter: dur("start-jitter"), clockFactor: factor,
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("parsing settings: %v", errs)
	}
	return s, nil
}
